//! The kernel symbols a recording names its kernel frames with: the lines of /proc/kallsyms
//! that cover the sampled kernel addresses, and /proc/modules, written at the end.
//!
//! Why read early: generating /proc/kallsyms is the kernel's costly part (about 50 ms of
//! system time for 150,000 symbols), and at the end it delayed rec's exit by that much after
//! the application's (5% of a 1.5 s recording). So the table is read as soon as the first
//! kernel address is sampled, by a thread at the idle scheduling class (it takes only CPU
//! time nobody wants: the application and a latency measurement never wait for it), and
//! kept deflated until the end, when only the lines needed are picked out. Memory while
//! recording: the deflated table, about a fifth of its text (1.1 MB for a desktop kernel's
//! 5.4 MB), and its text symbols' starts (8 bytes each: 1.2 MB there); less on a board.
//!
//! A module loaded or unloaded while recording changes the table: when /proc/modules at the
//! end does not list the same modules at the same addresses, the table is read again then.

use std::collections::HashSet;
use std::fs;
use std::thread::JoinHandle;

/// The table read early: its text symbols' starts (see [`starts`]), its text deflated with
/// the text's length, and the modules loaded when it was read. `kallsyms` is `None` when
/// the table was unreadable or hid its addresses.
struct Early {
    kallsyms: Option<(Vec<u64>, Vec<u8>, usize)>,
    modules: Vec<u8>,
}

/// The kernel symbol table, read ahead of the end (see the module docs).
#[derive(Default)]
pub struct KernelSymbols {
    early: Option<JoinHandle<Early>>,
}

impl KernelSymbols {
    /// Starts reading the table, once: on the first kernel address sampled. When no thread
    /// can be started, the table is read at the end.
    pub fn start(&mut self) {
        if self.early.is_some() {
            return;
        }
        self.early = std::thread::Builder::new()
            .name("rec-kallsyms".into())
            .spawn(|| {
                idle_priority();
                let modules = fs::read("/proc/modules").unwrap_or_default();
                let kallsyms = fs::read("/proc/kallsyms").ok().and_then(|text| {
                    let starts = starts(&text)?;
                    let z = miniz_oxide::deflate::compress_to_vec(&text, 1);
                    Some((starts, z, text.len()))
                });
                Early { kallsyms, modules }
            })
            .ok();
    }

    /// The blobs that name the kernel addresses `addrs`: `kallsyms` (see [`pick`]) and,
    /// with it, `modules`: /proc/modules whole (a line per loaded module, a few KiB even on a
    /// desktop), whose address ranges place frames in loadable modules. Empty when kallsyms
    /// is unreadable or hides addresses (kptr_restrict).
    pub fn blobs(self, addrs: &HashSet<u64>) -> Vec<(&'static str, Vec<u8>)> {
        let modules_now = fs::read("/proc/modules").ok();
        let early = self.early.and_then(|h| h.join().ok());
        let kallsyms = match early {
            Some(Early {
                kallsyms: Some((starts, z, len)),
                modules,
            }) if same_modules(&modules, modules_now.as_deref().unwrap_or_default()) => {
                let mut text = vec![0; len];
                let inflated = miniz_oxide::inflate::decompress_slice_iter_to_slice(
                    &mut text,
                    [&z[..]].into_iter(),
                    false,
                    true,
                );
                inflated.ok().map(|n| pick(&text[..n], &starts, addrs))
            }
            _ => fs::read("/proc/kallsyms")
                .ok()
                .and_then(|text| select(&text, addrs)),
        };
        let Some(kallsyms) = kallsyms else {
            return Vec::new();
        };
        let mut blobs = vec![("kallsyms", kallsyms)];
        if let Some(modules) = modules_now {
            blobs.push(("modules", modules));
        }
        blobs
    }
}

/// Puts the calling thread in the idle scheduling class (best effort: without it the read
/// merely competes as any thread of rec does).
fn idle_priority() {
    // SAFETY: sched_param is plain data (musl's has more fields than glibc's): all zeros is
    // priority 0, the only one SCHED_IDLE takes.
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; param is a valid sched_param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}

/// Whether two copies of /proc/modules list the same modules at the same addresses (their
/// use counts may differ: they do not move symbols).
fn same_modules(a: &[u8], b: &[u8]) -> bool {
    let loaded = |text: &[u8]| -> Vec<(Vec<u8>, Vec<u8>)> {
        text.split(|&c| c == b'\n')
            .filter_map(|line| {
                let mut fields = line.split(|&c| c == b' ').filter(|f| !f.is_empty());
                let name = fields.next()?.to_vec();
                let addr = fields.nth(4)?.to_vec();
                Some((name, addr))
            })
            .collect()
    };
    loaded(a) == loaded(b)
}

/// A text symbol's address, from a kallsyms line `ADDR TYPE NAME [MODULE]`.
fn text_symbol(line: &[u8]) -> Option<u64> {
    let mut it = line.split(|&b| b == b' ');
    let addr = std::str::from_utf8(it.next()?).ok()?;
    let addr = u64::from_str_radix(addr, 16).ok()?;
    matches!(it.next()?, b"t" | b"T" | b"w" | b"W").then_some(addr)
}

/// The starts of the text symbols of the kallsyms `text`, sorted, each once: one `u64` per
/// symbol. `None` when the table hides addresses (kptr_restrict shows them all as 0).
fn starts(text: &[u8]) -> Option<Vec<u64>> {
    let mut starts: Vec<u64> = text
        .split(|&b| b == b'\n')
        .filter_map(text_symbol)
        .collect();
    if starts.iter().all(|&a| a == 0) {
        return None;
    }
    starts.sort_unstable();
    starts.dedup();
    Some(starts)
}

/// The lines of the kallsyms `text` (whose text symbols start at `starts`) that name the
/// given kernel addresses: for each address, the text symbol with the greatest start at or
/// below it. Writing only these (instead of the whole table, megabytes on a desktop kernel)
/// keeps recordings small; the host's lookup of an address then finds the same symbol it
/// would in the full table.
fn pick(text: &[u8], starts: &[u64], addrs: &HashSet<u64>) -> Vec<u8> {
    let mut needed = HashSet::new();
    for &a in addrs {
        // Return addresses are looked up at address-1 on the host.
        for a in [a, a.saturating_sub(1)] {
            let i = starts.partition_point(|&s| s <= a);
            if i > 0 {
                needed.insert(starts[i - 1]);
            }
        }
    }
    let mut out = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        if text_symbol(line).is_some_and(|a| needed.remove(&a)) {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out
}

/// [`pick`] on a table read now: `None` when it hides addresses.
fn select(text: &[u8], addrs: &HashSet<u64>) -> Option<Vec<u8>> {
    Some(pick(text, &starts(text)?, addrs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_gets_the_text_symbol_at_or_below_it() {
        let text = b"ffff0010 T start_kernel\nffff0020 D some_data\nffff0030 t helper\n\
                     ffff0040 T [mod_fn]\tmymod\n";
        let addrs: HashSet<u64> = [0xffff_0015, 0xffff_0031].into();
        let got = select(text, &addrs).expect("addresses shown");
        assert_eq!(got, b"ffff0010 T start_kernel\nffff0030 t helper\n");
        // A return address just past a symbol's start also names the one before (address-1).
        let got = select(text, &[0xffff_0030].into()).expect("shown");
        assert_eq!(got, b"ffff0010 T start_kernel\nffff0030 t helper\n");
        // kptr_restrict: every address 0.
        let hidden = b"0000000000000000 T start_kernel\n0000000000000000 t helper\n";
        assert_eq!(select(hidden, &addrs), None);
    }

    #[test]
    fn module_lists_differ_only_in_what_moves_symbols() {
        let a = b"nf_tables 1 2 - Live 0xffffffffc0a00000\nxt_conntrack 12288 3 - Live 0xffffffffc09f0000\n";
        let counts = b"nf_tables 1 5 nft_chain, Live 0xffffffffc0a00000\nxt_conntrack 12288 3 - Live 0xffffffffc09f0000\n";
        let moved = b"nf_tables 1 2 - Live 0xffffffffc0b00000\nxt_conntrack 12288 3 - Live 0xffffffffc09f0000\n";
        let unloaded = b"nf_tables 1 2 - Live 0xffffffffc0a00000\n";
        assert!(same_modules(a, a));
        assert!(same_modules(a, counts));
        assert!(!same_modules(a, moved));
        assert!(!same_modules(a, unloaded));
        assert!(same_modules(b"", b""));
    }

    #[test]
    fn the_early_table_names_the_same_symbols_as_a_late_read() {
        // On this machine: the table read ahead and compressed gives what a read at the end
        // gives (both are the running kernel's).
        let Ok(text) = fs::read("/proc/kallsyms") else {
            return;
        };
        let addrs: HashSet<u64> = text
            .split(|&b| b == b'\n')
            .filter_map(|l| l.split(|&b| b == b' ').next())
            .filter_map(|a| std::str::from_utf8(a).ok())
            .filter_map(|a| u64::from_str_radix(a, 16).ok())
            .step_by(997)
            .map(|a| a + 3)
            .collect();
        let mut k = KernelSymbols::default();
        k.start();
        let early = k.blobs(&addrs);
        let late = select(&text, &addrs).map(|t| vec![("kallsyms", t)]);
        match late {
            Some(late) => assert_eq!(early.first(), late.first()),
            None => assert!(early.is_empty()),
        }
    }
}
