//! One function's record (`runtime._func`): its name, pc-value tables and the runtime's flags.

use crate::header::{uint, Header, Version};
use crate::pcvalue::value_at;

/// `runtime.funcFlag_TOPFRAME`: the function is the outermost frame of a stack (a goroutine's
/// `runtime.goexit`, a thread's `runtime.mstart`, the program's `runtime.rt0_go`, a signal
/// handler's `runtime.sigtramp`).
const TOP_FRAME: u8 = 1;
/// `runtime.funcFlag_SPWRITE`: the function writes the stack pointer in a way the frame-size
/// table cannot describe: it switches stacks (`runtime.systemstack`, `runtime.mcall`,
/// `runtime.morestack`, `runtime.asmcgocall`, `runtime.gogo`).
const SP_WRITE: u8 = 2;

/// One function of a [`crate::GoTable`], found by [`crate::GoTable::func_at`].
#[derive(Debug, Clone, Copy)]
pub struct Func<'t> {
    pub(crate) data: &'t [u8],
    pub(crate) h: &'t Header,
    /// The function's first instruction, at the address the table states (the link-time
    /// address; add the load bias for a position-independent executable's runtime address).
    pub entry: u64,
    /// The address after its last instruction (the next function's entry).
    pub end: u64,
    /// Where the record starts in the table.
    pub(crate) record: usize,
}

impl<'t> Func<'t> {
    /// Byte offset of the fields after the entry (4 bytes in 1.18 and later, a pointer in 1.16).
    fn fields(&self) -> usize {
        match self.h.version {
            Version::Go116 => usize::from(self.h.ptr),
            _ => 4,
        }
    }

    fn u32_at(&self, field: usize) -> Option<u32> {
        let at = self.record.checked_add(self.fields())?.checked_add(field)?;
        uint(self.data, at, 4, self.h.big_endian).map(|v| v as u32)
    }

    /// The byte at `field` bytes past the fixed u32 fields (funcID, flag, ...).
    fn byte_after_u32s(&self, field: usize) -> Option<u8> {
        // nameoff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset (and startLine in
        // 1.20 and later).
        let u32s = match self.h.version {
            Version::Go120 => 9,
            _ => 8,
        };
        let at = self
            .record
            .checked_add(self.fields())?
            .checked_add(4 * u32s + field)?;
        self.data.get(at).copied()
    }

    /// The function's name as Go prints it (`main.main`, `go/printer.(*printer).print`,
    /// `runtime.gcBgMarkWorker.func2`); `None` when the table's name is damaged.
    pub fn name(&self) -> Option<&'t str> {
        let off = self.u32_at(0)? as i32;
        let start = self.h.funcnames.checked_add(usize::try_from(off).ok()?)?;
        c_string(self.data, start)
    }

    /// The value of the pc-value table whose offset is the record's field `field` at `pc`.
    fn table_value(&self, field: usize, pc: u64) -> Option<i32> {
        let off = self.u32_at(field)?;
        if off == 0 {
            return None;
        }
        let start = self.h.pctab.checked_add(usize::try_from(off).ok()?)?;
        let table = self.data.get(start..)?;
        value_at(table, self.entry, self.h.quantum, pc)
    }

    /// How far the stack pointer at `pc` lies below the function's entry stack pointer, in
    /// bytes: the frame the function has allocated by then (0 at the entry and in functions
    /// without a frame). The return address is above it: at `sp + delta` on x86, where
    /// `call` pushed it, or in the link register (delta 0) or at `sp` (delta > 0) on ARM,
    /// AArch64 and RISC-V, where Go's prologue stores it at the bottom of the new frame.
    pub fn sp_delta(&self, pc: u64) -> Option<u64> {
        self.table_value(12, pc).and_then(|v| u64::try_from(v).ok())
    }

    /// The source file and line of the instruction at `pc`.
    pub fn file_line(&self, pc: u64) -> Option<(&'t str, u32)> {
        let fileno = u32::try_from(self.table_value(16, pc)?).ok()?;
        let line = u32::try_from(self.table_value(20, pc)?).ok()?;
        let cu = self.u32_at(28)?;
        let slot = self
            .h
            .cutab
            .checked_add(4 * usize::try_from(cu.checked_add(fileno)?).ok()?)?;
        let fileoff = uint(self.data, slot, 4, self.h.big_endian)?;
        if fileoff == u64::from(u32::MAX) {
            return None;
        }
        let file = c_string(
            self.data,
            self.h.filetab.checked_add(usize::try_from(fileoff).ok()?)?,
        )?;
        Some((file, line))
    }

    /// The runtime's function id (`runtime.funcID`): which special runtime function this is,
    /// numbered per Go release; 0 for ordinary functions.
    pub fn func_id(&self) -> u8 {
        self.byte_after_u32s(0).unwrap_or(0)
    }

    /// Whether the function is the outermost frame of a stack: Go's traceback stops there,
    /// and so should any unwinder.
    pub fn is_top_frame(&self) -> bool {
        self.flags() & TOP_FRAME != 0
    }

    /// Whether the function switches stacks (writes the stack pointer): its caller cannot be
    /// found from the frame-size table, and Go's profiler ends a stack there.
    pub fn switches_stacks(&self) -> bool {
        self.flags() & SP_WRITE != 0
    }

    fn flags(&self) -> u8 {
        // Go 1.16 has padding here; its records read as no flags.
        self.byte_after_u32s(1).unwrap_or(0)
    }
}

/// The NUL-terminated UTF-8 string at `start`; `None` when unterminated or not UTF-8.
fn c_string(data: &[u8], start: usize) -> Option<&str> {
    let rest = data.get(start..)?;
    let len = rest.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&rest[..len]).ok()
}
