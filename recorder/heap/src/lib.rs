//! `libcrossprof_heap.so`: the heap interposer that `rec --heap` preloads into the profiled
//! program. It replaces the malloc family, forwards each call to the real allocator, and
//! hands `rec` every allocation and free with the raw stack of the caller, in the order
//! they happened, through a shared-memory ring (`crossprof-heap-wire`). It never symbolizes.
//!
//! Use it only through `rec --heap`; loaded without `rec` it forwards every call and records
//! nothing. Constraints that shape it:
//! - it runs inside `malloc`, so the hot path allocates nothing through `malloc` (its own
//!   memory comes from `mmap` system calls, see [`arena`], which never reach its own `mmap`
//!   hook) and calls only async-signal-safe functions
//!   (futexes, `clock_gettime`, plain stores), which is also what musl requires of a
//!   replacement malloc; the one-time set-up (dlsym, dl_iterate_phdr, pthread_atfork, atexit)
//!   runs at load time, except that an allocation made before it (by the initializer of a
//!   library loaded earlier) scans the modules itself;
//! - no lock but its own inside an allocation: the loader allocates and frees with its own
//!   lock held, so a thread in `malloc` that waited for the loader's lock (`dl_iterate_phdr`,
//!   `dlsym`) could wait for ever on a thread in `dlopen` or `dlclose` that waits for the
//!   interposer's. The module list is read when `dlopen` (musl) and `dlclose` return
//!   (`dl.rs`); on glibc a stack that meets a module loaded since finds it with
//!   `_dl_find_object`, which is lock-free (`stack::find`). ARMv7 runs no unwinder inside
//!   `malloc` at all: it records the entry registers and the stack words an unwind may need,
//!   checked against that list, and the host unwinds them (`stack::sparse`). Where the C
//!   runtime's unwinder still runs inside `malloc` (i686 and RISC-V builds, which link LLVM's
//!   libunwind), the `dl_iterate_phdr` it asks is the interposer's own, answered from that
//!   list without the loader's lock (`stack::phdr_list`);
//! - signal safety: a malloc-family call from a signal handler is recorded like any other.
//!   When the handler interrupted its own thread inside the event path (which may hold the
//!   interposer's lock or its arena's spin lock), its event is parked in a per-thread area
//!   with a frame-pointer stack, taking no lock, and written out by the interrupted event;
//!   the module-list rebuilds outside an allocation (at `dlopen`/`dlclose`) count as the
//!   event path for this. Otherwise the event path takes only the interposer's lock (a
//!   futex), reads the thread's own stack within its bounds, and calls `clock_gettime`,
//!   `_dl_find_object`, the unwinder (framehop, or libunwind answered by `stack::phdr_list`;
//!   on ARMv7 plain loads of the thread's own stack) and the arena (`mmap` and atomics): all
//!   async-signal-safe;
//! - at exit it asks libstdc++ to free its start-up pool, as heaptrack does (`freeres.rs`);
//! - it must never deadlock or stop the application, even when `rec` dies.
//!
//! Cost: one lock, a check of the unwind memo (a stack unwound before from the same
//! registers, with the words that decided it unchanged, is not unwound again; otherwise one
//! framehop unwind with cached rules, which stops at the first frame where it meets the
//! previous unwind with the words above unchanged and takes the rest from it; on ARMv7 a
//! scan of the used stack, at most 32 KiB, and the trace-tree look-ups of the words kept)
//! and a ring write per event; memory: a 2 MiB ring, the trace tree (bounded, see [`trie`]),
//! the memo (under 2 MiB, touched as used), the rule caches (under 1 MiB) and the last
//! unwind (30 KiB) per process.
//!
//! Sampled mode (`rec --heap-sample BYTES`, see [`sample`]): only allocations that cover a
//! sampling point take the path above; the others cost a thread-local subtraction (the
//! thread-local reached from the thread pointer in a launched program), and a free one byte
//! of a counting filter in front of the set of sampled live blocks.
//!
//! Memory beyond malloc (`mmap.rs`): the program's own anonymous `mmap`s, `munmap`s and
//! `mremap`s are events too, with their stacks; the C library's allocator and thread stacks
//! map memory through internal calls and are not among them.
//!
//! Non-goals: statically linked programs (nothing can be preloaded), custom allocators that
//! do not go through the malloc family (their chunks show as mappings when they call `mmap`
//! by its symbol; the blocks they hand out inside are invisible).
#![deny(missing_docs)]

extern crate alloc;

mod announce;
pub mod arena;
pub mod attach;
mod dl;
mod freeres;
mod got;
mod hooks;
mod lock;
mod mmap;
mod real;
mod record;
pub mod sample;
mod stack;
mod stats;
mod sys;
mod thread;
mod transport;
pub mod trie;

/// The interposer's own allocations never go through the `malloc` it replaces.
#[global_allocator]
static ARENA: arena::Arena = arena::Arena::new();

extern "C" fn on_load() {
    record::init();
}

/// Runs [`record::init`] when the library is loaded (before the program's `main`).
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
