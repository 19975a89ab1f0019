//! DWARF call-frame information (`.debug_frame`) for the architectures framehop does not
//! cover, read with gimli. On 32-bit ARM it is the fallback the issue asks for: gcc emits no
//! EHABI entries for C code unless built with `-funwind-tables`, but with `-g` it does emit
//! `.debug_frame`, which the debug sysroot has.
//!
//! gimli parses the CFI; this module only indexes the FDEs once per module (`.debug_frame`
//! has no search table) and applies a row's rules to a register set.

use std::sync::Arc;

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EndianSlice, Register, RegisterRule,
    RunTimeEndian, UnwindContext, UnwindSection,
};

/// More FDEs than this in one module is not a real file; stop indexing there.
const MAX_FDES: usize = 1 << 20;

/// An indexed `.debug_frame`.
#[derive(Debug, Clone)]
pub struct CfiTable {
    data: Arc<[u8]>,
    endian: RunTimeEndian,
    address_size: u8,
    /// (start, end, FDE offset), sorted by start.
    index: Vec<(u64, u64, usize)>,
}

/// The caller's registers, as far as the row says.
pub struct CallerRegs {
    /// The canonical frame address: the caller's stack pointer.
    pub cfa: u64,
    /// The return address (`None`: the row says the stack ends here).
    pub ra: Option<u64>,
    /// Registers restored from the stack or other registers, by DWARF number.
    pub restored: Vec<(u16, u64)>,
}

impl CfiTable {
    /// Indexes a `.debug_frame` section. Malformed entries are skipped.
    pub fn debug_frame(data: Arc<[u8]>, big_endian: bool, address_size: u8) -> CfiTable {
        let endian = if big_endian {
            RunTimeEndian::Big
        } else {
            RunTimeEndian::Little
        };
        let mut t = CfiTable {
            data,
            endian,
            address_size,
            index: Vec::new(),
        };
        let mut index = Vec::new();
        {
            let section = t.section();
            let bases = BaseAddresses::default();
            let mut entries = section.entries(&bases);
            while let Ok(Some(entry)) = entries.next() {
                if index.len() >= MAX_FDES {
                    break;
                }
                if let CieOrFde::Fde(partial) = entry {
                    if let Ok(fde) = partial.parse(DebugFrame::cie_from_offset) {
                        let start = fde.initial_address();
                        index.push((start, start.saturating_add(fde.len()), fde.offset()));
                    }
                }
            }
        }
        index.sort_unstable();
        t.index = index;
        t
    }

    fn section(&self) -> DebugFrame<EndianSlice<'_, RunTimeEndian>> {
        let mut s = DebugFrame::new(&self.data, self.endian);
        s.set_address_size(self.address_size);
        s
    }

    /// Whether an FDE covers stated address `svma`.
    pub fn covers(&self, svma: u64) -> bool {
        self.find(svma).is_some()
    }

    fn find(&self, svma: u64) -> Option<usize> {
        let i = self.index.partition_point(|&(start, _, _)| start <= svma);
        let &(start, end, offset) = self.index.get(i.checked_sub(1)?)?;
        (start <= svma && svma < end).then_some(offset)
    }

    /// Applies the unwind row for `svma` to the registers `get` provides (by DWARF number),
    /// reading saved values through `read`. `None` when no row applies or a rule cannot be
    /// evaluated (DWARF expressions are not).
    pub fn step(
        &self,
        svma: u64,
        get: &dyn Fn(u16) -> Option<u64>,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Option<CallerRegs> {
        let offset = self.find(svma)?;
        let section = self.section();
        let bases = BaseAddresses::default();
        let fde = section
            .fde_from_offset(
                &bases,
                gimli::DebugFrameOffset(offset),
                DebugFrame::cie_from_offset,
            )
            .ok()?;
        let mut ctx = UnwindContext::new();
        let row = fde
            .unwind_info_for_address(&section, &bases, &mut ctx, svma)
            .ok()?;
        let mask = if self.address_size == 4 {
            0xffff_ffff
        } else {
            u64::MAX
        };
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => {
                get(register.0)?.wrapping_add(*offset as u64) & mask
            }
            CfaRule::Expression(_) => return None,
        };
        let ra_reg = fde.cie().return_address_register();
        let mut restored = Vec::new();
        let mut ra = get(ra_reg.0);
        for (reg, rule) in row.registers() {
            let value = match rule {
                RegisterRule::Undefined => {
                    if *reg == ra_reg {
                        ra = None;
                    }
                    continue;
                }
                RegisterRule::SameValue => continue,
                RegisterRule::Offset(n) => read(cfa.wrapping_add(*n as u64) & mask)?,
                RegisterRule::ValOffset(n) => cfa.wrapping_add(*n as u64) & mask,
                RegisterRule::Register(Register(r)) => get(*r)?,
                _ => return None,
            };
            if *reg == ra_reg {
                ra = Some(value);
            }
            restored.push((reg.0, value));
        }
        Some(CallerRegs { cfa, ra, restored })
    }
}
