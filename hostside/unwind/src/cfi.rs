//! DWARF call-frame information (`.eh_frame` and `.debug_frame`) for the architectures
//! framehop does not cover, read with gimli: 32-bit x86 and RISC-V, and 32-bit ARM where
//! `.debug_frame` is the fallback the issue asks for (gcc emits no EHABI entries for C code
//! unless built with `-funwind-tables`, but with `-g` it emits `.debug_frame`, which the debug
//! sysroot has).
//!
//! gimli parses the CFI; this module only indexes the FDEs once per module (`.debug_frame`
//! has no search table, and walking `.eh_frame` once is cheaper than trusting a damaged
//! `.eh_frame_hdr`) and applies a row's rules to a register set.

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, DebugFrameOffset, EhFrame, EhFrameOffset,
    EndianSlice, Evaluation, EvaluationResult, Expression, Location, Register, RegisterRule,
    RunTimeEndian, UnwindContext, UnwindExpression, UnwindSection, UnwindTableRow, Value,
};

/// Steps of a DWARF expression evaluated before giving up: real CFI expressions have a
/// handful of operations, and a hostile one must not loop.
const MAX_EXPRESSION_STEPS: usize = 64;

/// More FDEs than this in one module is not a real file; stop indexing there.
const MAX_FDES: usize = 1 << 20;

use crate::bytes::Section;

type Slice<'a> = EndianSlice<'a, RunTimeEndian>;

/// Which section, and for `.eh_frame` its stated address (pointers in it are pc-relative).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Debug,
    Eh { svma: u64 },
}

/// An indexed CFI section.
#[derive(Debug, Clone)]
pub struct CfiTable {
    data: Section,
    kind: Kind,
    endian: RunTimeEndian,
    address_size: u8,
    /// (start, end, FDE offset), sorted by start.
    index: Vec<(u64, u64, usize)>,
    /// Entries left out of `index` because they did not parse (see [`CfiTable::skipped`]).
    skipped: u64,
    /// Whether the return address lives in a register (AArch64 x30, ARM lr, RISC-V ra), so
    /// that a row without a rule for it means "still there". On x86 it lives on the stack,
    /// every CIE gives it a rule, and no rule means undefined: the outermost frame (gimli
    /// stores an undefined rule as no rule).
    ra_in_register: bool,
}

/// What a CFI section's encoding depends on: the file's byte order and word size, and where
/// its architecture keeps return addresses.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Big-endian file.
    pub big_endian: bool,
    /// 4 or 8.
    pub address_size: u8,
    /// The return address lives in a register (not x86).
    pub ra_in_register: bool,
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

/// The section's FDEs as (start, end, offset), sorted, and how many entries were skipped: each
/// FDE that did not parse (or whose CIE did not), plus one when the rest of the section could
/// not be read or held more than [`MAX_FDES`] entries.
fn collect<'a, S>(section: &S, bases: &BaseAddresses) -> (Vec<(u64, u64, usize)>, u64)
where
    S: UnwindSection<Slice<'a>>,
    S::Offset: gimli::UnwindOffset<usize>,
{
    let mut index = Vec::new();
    let mut skipped = 0u64;
    let mut entries = section.entries(bases);
    loop {
        let entry = match entries.next() {
            Ok(Some(entry)) => entry,
            Ok(None) => break,
            Err(_) => {
                skipped += 1;
                break;
            }
        };
        if index.len() >= MAX_FDES {
            skipped += 1;
            break;
        }
        if let CieOrFde::Fde(partial) = entry {
            match partial.parse(S::cie_from_offset) {
                Ok(fde) => {
                    let start = fde.initial_address();
                    index.push((start, start.saturating_add(fde.len()), fde.offset()));
                }
                Err(_) => skipped += 1,
            }
        }
    }
    index.sort_unstable();
    (index, skipped)
}

impl CfiTable {
    /// Indexes a `.debug_frame` section. Malformed entries are skipped.
    pub fn debug_frame(data: Section, arch: &Layout) -> CfiTable {
        Self::new(data, Kind::Debug, arch)
    }

    /// Indexes an `.eh_frame` section that the file states at `svma`.
    pub fn eh_frame(data: Section, svma: u64, arch: &Layout) -> CfiTable {
        Self::new(data, Kind::Eh { svma }, arch)
    }

    fn new(data: Section, kind: Kind, layout: &Layout) -> CfiTable {
        let Layout {
            big_endian,
            address_size,
            ra_in_register,
        } = *layout;
        let endian = if big_endian {
            RunTimeEndian::Big
        } else {
            RunTimeEndian::Little
        };
        let mut t = CfiTable {
            data,
            kind,
            endian,
            address_size,
            index: Vec::new(),
            skipped: 0,
            ra_in_register,
        };
        let (index, skipped) = {
            let bases = t.bases();
            match t.kind {
                Kind::Debug => collect(&t.debug(), &bases),
                Kind::Eh { .. } => collect(&t.eh(), &bases),
            }
        };
        t.index = index;
        t.skipped = skipped;
        t
    }

    /// Entries that did not parse and were left out (a damaged or truncated section): the
    /// addresses they covered unwind as code without unwind info.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    fn bases(&self) -> BaseAddresses {
        match self.kind {
            Kind::Debug => BaseAddresses::default(),
            Kind::Eh { svma } => BaseAddresses::default().set_eh_frame(svma),
        }
    }

    fn debug(&self) -> DebugFrame<Slice<'_>> {
        let mut s = DebugFrame::new(&self.data, self.endian);
        s.set_address_size(self.address_size);
        s
    }

    fn eh(&self) -> EhFrame<Slice<'_>> {
        let mut s = EhFrame::new(&self.data, self.endian);
        s.set_address_size(self.address_size);
        s
    }

    /// The address ranges the FDEs cover, sorted by start.
    #[cfg(test)]
    pub(crate) fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.index.iter().map(|&(start, end, _)| (start, end))
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
        let bases = self.bases();
        let mut ctx = UnwindContext::new();
        match self.kind {
            Kind::Debug => {
                let s = self.debug();
                let fde = s
                    .fde_from_offset(
                        &bases,
                        DebugFrameOffset(offset),
                        DebugFrame::cie_from_offset,
                    )
                    .ok()?;
                let row = fde
                    .unwind_info_for_address(&s, &bases, &mut ctx, svma)
                    .ok()?;
                let expr = |e: &UnwindExpression<usize>| e.get(&s).ok();
                self.apply(row, fde.cie().return_address_register(), &expr, get, read)
            }
            Kind::Eh { .. } => {
                let s = self.eh();
                let fde = s
                    .fde_from_offset(&bases, EhFrameOffset(offset), EhFrame::cie_from_offset)
                    .ok()?;
                let row = fde
                    .unwind_info_for_address(&s, &bases, &mut ctx, svma)
                    .ok()?;
                let expr = |e: &UnwindExpression<usize>| e.get(&s).ok();
                self.apply(row, fde.cie().return_address_register(), &expr, get, read)
            }
        }
    }

    /// Evaluates a CFI expression (e.g. i386 `main`'s realigned frame: `DW_OP_breg5 -4;
    /// DW_OP_deref`) to the address it yields; `initial` is pushed first (the CFA, for
    /// register rules).
    fn evaluate(
        &self,
        e: Expression<Slice<'_>>,
        initial: Option<u64>,
        get: &dyn Fn(u16) -> Option<u64>,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Option<u64> {
        let encoding = gimli::Encoding {
            format: gimli::Format::Dwarf32,
            version: 4,
            address_size: self.address_size,
        };
        let mut eval: Evaluation<Slice<'_>> = e.evaluation(encoding);
        if let Some(v) = initial {
            eval.set_initial_value(v);
        }
        let mut result = eval.evaluate().ok()?;
        for _ in 0..MAX_EXPRESSION_STEPS {
            result = match result {
                EvaluationResult::Complete => {
                    let pieces = eval.result();
                    return match pieces.first()?.location {
                        Location::Address { address } => Some(address),
                        _ => None,
                    };
                }
                EvaluationResult::RequiresRegister { register, .. } => eval
                    .resume_with_register(Value::Generic(get(register.0)?))
                    .ok()?,
                EvaluationResult::RequiresMemory { address, .. } => eval
                    .resume_with_memory(Value::Generic(read(address)?))
                    .ok()?,
                _ => return None,
            };
        }
        None
    }

    fn apply<'s>(
        &self,
        row: &UnwindTableRow<usize>,
        ra_reg: Register,
        expr: &dyn Fn(&UnwindExpression<usize>) -> Option<Expression<Slice<'s>>>,
        get: &dyn Fn(u16) -> Option<u64>,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Option<CallerRegs> {
        let mask = if self.address_size == 4 {
            0xffff_ffff
        } else {
            u64::MAX
        };
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => {
                get(register.0)?.wrapping_add(*offset as u64) & mask
            }
            CfaRule::Expression(e) => self.evaluate(expr(e)?, None, get, read)? & mask,
        };
        let mut restored = Vec::new();
        let mut ra = if self.ra_in_register {
            get(ra_reg.0)
        } else {
            None
        };
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
                RegisterRule::Expression(e) => {
                    let at = self.evaluate(expr(e)?, Some(cfa), get, read)?;
                    read(at & mask)?
                }
                RegisterRule::ValExpression(e) => {
                    self.evaluate(expr(e)?, Some(cfa), get, read)? & mask
                }
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
