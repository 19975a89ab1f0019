//! ARMv7 heap stacks as the board records them: the hook's entry registers and the stack
//! words an unwind may need (`crossprof_heap_wire::sparse`), turned into return addresses
//! here by the same ARM unwinder and sysroot tables as the CPU samples' stack copies.
//!
//! Each distinct board chain is unwound once (the trace tree asks once per chain and address
//! space): the words are laid out again as a stack image, every word the board did not keep
//! reading as [`sparse::UNKNOWN`], an odd address outside every mapping, so an unwind that
//! needs one stops (counted as cut short) and never makes a frame up. An unwind that does not
//! reach the outermost frame carries the `crossprof_heap_wire::cut_short` marker of why, and
//! the heap diagnostics count its allocations as for any stack the interposer cut short.
//! Memory: one image per chain at a time, at most [`MAX_IMAGE_BYTES`].

use crossprof_heap_wire::{cut_short, sparse};
use crossprof_unwind::{CutShort, Outcome, Registers};

use crossprof_format::Arch;

use crate::analysis::heap::stream::State;
use crate::analysis::heap::trace_tree::{Expand, TraceId};
use crate::processes::{Processes, SpaceKey};
use crate::resolve::Resolver;
use crate::unwinding::StackUnwinder;

/// Largest stack image built: the interposer scans at most 32 KiB; a chain whose words lie
/// further is damaged, and its words beyond this are left out.
pub const MAX_IMAGE_BYTES: u32 = 256 * 1024;

/// Unwinds sparse ARMv7 stacks (see the module docs).
pub struct SparseStacks<'a> {
    unwinder: StackUnwinder<'a>,
    big_endian: bool,
}

impl<'a> SparseStacks<'a> {
    /// The unwinder of a recording whose header says its heap stacks are sparse, in this
    /// byte order (`Some(big_endian)`, see `HeapOptions::sparse_arm`); `None` for others.
    pub fn of(
        processes: &'a Processes,
        resolver: &'a Resolver,
        sparse_arm: Option<bool>,
    ) -> Option<Self> {
        sparse_arm.map(|big_endian| SparseStacks {
            unwinder: StackUnwinder::new(processes, resolver, Arch::Arm, big_endian),
            big_endian,
        })
    }
}

impl State<'_> {
    /// The canonical trace of board stack `id` of `space` (unwound first when the recording
    /// holds sparse ARMv7 stacks).
    pub(super) fn trace(&mut self, space: SpaceKey, id: u64) -> TraceId {
        let expand = self.sparse.as_mut().map(|s| s as &mut dyn Expand);
        self.tree.trace_with(space, id, self.processes, expand)
    }
}

/// The stack image of `words` (word entries of a chain whose registers are `regs`): from
/// offset 0 to past the highest kept word, unknown words as [`sparse::UNKNOWN`].
pub fn image(words: &[u64], regs: &sparse::Registers, big_endian: bool) -> Vec<u8> {
    let end = words
        .iter()
        .filter_map(|&e| sparse::split_word(e, regs))
        .map(|(off, _)| off)
        .filter(|&off| off.is_multiple_of(4) && off < MAX_IMAGE_BYTES)
        .max()
        .map_or(0, |off| off as usize + 4);
    let bytes = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out: Vec<u8> = std::iter::repeat_n(bytes(sparse::UNKNOWN), end / 4)
        .flatten()
        .collect();
    for (off, value) in words.iter().filter_map(|&e| sparse::split_word(e, regs)) {
        let off = off as usize;
        if off.is_multiple_of(4) && off + 4 <= end {
            out[off..off + 4].copy_from_slice(&bytes(value));
        }
    }
    out
}

/// The marker of an unwind that stopped for `why`.
fn marker(why: CutShort) -> u64 {
    match why {
        CutShort::StackCopyEnded => cut_short::STACK_UNREADABLE,
        CutShort::NoUnwindTables | CutShort::NoUnwindInfo => cut_short::NO_UNWIND_INFO,
        CutShort::OutsideMappings | CutShort::BadFrame => cut_short::BAD_FRAME,
        CutShort::TooDeep => cut_short::TOO_DEEP,
    }
}

impl Expand for SparseStacks<'_> {
    fn expand(
        &mut self,
        space: SpaceKey,
        chain: &[u64],
        cut: Option<u64>,
    ) -> (Vec<u64>, Option<u64>) {
        let Some((r, words)) = sparse::decode(chain) else {
            return (Vec::new(), Some(cut_short::BAD_FRAME));
        };
        let pc = u64::from(r.lr & !1);
        if pc == 0 {
            return (Vec::new(), Some(cut_short::NO_UNWIND_INFO));
        }
        if r.sp == 0 {
            // The interposer could not tell the caller's registers: the site alone.
            return (vec![pc], Some(cut_short::NO_UNWIND_INFO));
        }
        let mut arm = [0u32; 16];
        arm[7] = r.r7;
        arm[11] = r.r11;
        arm[13] = r.sp;
        arm[14] = sparse::UNKNOWN;
        arm[15] = pc as u32;
        let regs = Registers {
            pc,
            sp: u64::from(r.sp),
            fp: u64::from(r.r7),
            lr: u64::from(sparse::UNKNOWN),
            arm,
        };
        let stack = image(words, &r, self.big_endian);
        let (mut frames, outcome) = self.unwinder.unwind_image(space, regs, &stack);
        if frames.is_empty() {
            // The return address lies outside every mapping the recording knows.
            frames.push(pc);
        }
        let why = match outcome {
            Outcome::Complete => None,
            // The board kept fewer words than the stack had: that is why it stopped.
            Outcome::CutShort(_) if cut.is_some() => cut,
            Outcome::CutShort(why) => Some(marker(why)),
        };
        (frames, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_words_read_as_the_unknown_value() {
        let regs = sparse::Registers {
            lr: 0x1001,
            sp: sparse::TOP - 0x100,
            r7: 0,
            r11: 0,
        };
        // 4 and 12 bytes above the stack pointer; the second points 0x40 above it.
        let words = [
            sparse::word(0x100 - 4, 0x1234),
            sparse::stack_word(0x100 - 12, 0x100 - 0x40),
        ];
        let img = image(&words, &regs, false);
        assert_eq!(img.len(), 16);
        let w = |i: usize| u32::from_le_bytes(img[i..i + 4].try_into().unwrap());
        assert_eq!(
            (w(0), w(4), w(8), w(12)),
            (sparse::UNKNOWN, 0x1234, sparse::UNKNOWN, sparse::TOP - 0xc0)
        );
        // A damaged offset (unaligned, or far beyond any scan) is left out.
        let img = image(
            &[sparse::word(0x100 - 3, 1), sparse::word(0x200, 1)],
            &regs,
            false,
        );
        assert!(img.is_empty());
    }
}
