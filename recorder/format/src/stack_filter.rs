//! Sampled stack copies without the words no unwinder follows: each word of a copy that is
//! neither zero, nor an address in an executable mapping, nor near the stack is replaced by a
//! constant before the frame is compressed.
//!
//! Why: a stack copy is mostly the live locals of the interrupted functions, new in every
//! sample, which zstd cannot shrink: on SQLite's shell (bench/RESULTS.md) the stack copies
//! cost 69 of a sample's 81 compressed bytes, and the innermost kilobyte alone 52. Unwinding
//! takes from the stack only return addresses, which must lie in executable code to be
//! followed, and saved frame and stack pointers, which must point into the copy (or just
//! around it) to be followed. Any other value can only end the walk, as an address outside
//! every mapping or a read outside the copy; the substitute ends it the same way: a value
//! below the stack becomes 1 and one above it becomes the top of the address space minus 255,
//! so a walk that went outside the mappings, moved backwards or left the copy still does.
//!
//! The executable mappings are those the file's `Mmap` records name (of any process). The
//! filter runs when a frame is closed, so a mapping written later in the same frame (rings
//! are drained one CPU after another) still counts. A stack copy is left whole while no
//! executable mapping is known.

use crate::record::{Header, Mmap, Sample};
use crate::{Arch, PerfRegs};

/// A stack copy waiting in the frame buffer.
struct Pending {
    start: usize,
    len: usize,
    sp: u64,
}

/// Stack bytes below and above the copy that still count as "near the stack": more than any
/// offset an unwind rule adds to a frame or stack pointer.
const SLACK: u64 = 1 << 16;
/// `PROT_EXEC` (the same on every Linux architecture).
const PROT_EXEC: u32 = 4;

/// The filter of one recording: the word layout of its architecture and the executable
/// mappings seen so far. Costs a sorted list of mappings and one entry per stack copy of the
/// open frame.
pub(crate) struct StackFilter {
    word: usize,
    big_endian: bool,
    sp_reg: u32,
    /// Applied to a value before the mapping lookup: AArch64 keeps a pointer authentication
    /// code in the top bits of signed return addresses.
    address_mask: u64,
    /// Replacements for values below and above the stack.
    low: u64,
    high: u64,
    code: Vec<(u64, u64)>,
    pending: Vec<Pending>,
}

impl StackFilter {
    /// The filter for a recording with `header`; `None` for an architecture or word size it
    /// does not know (stack copies are then written whole).
    pub(crate) fn new(header: &Header) -> Option<StackFilter> {
        let arch = Arch::from_name(&header.arch)?;
        let word = usize::from(header.pointer_size);
        let (address_mask, high) = match word {
            8 if arch == Arch::Aarch64 => ((1 << 48) - 1, 0xffff_ffff_ffff_ff00),
            8 => (u64::MAX, 0xffff_ffff_ffff_ff00),
            4 => (u64::from(u32::MAX), 0xffff_ff00),
            _ => return None,
        };
        Some(StackFilter {
            word,
            big_endian: header.big_endian,
            sp_reg: PerfRegs::of(arch).sp,
            address_mask,
            low: 1,
            high,
            code: Vec::new(),
            pending: Vec::new(),
        })
    }

    /// Takes note of a mapping: executable ones keep the words that point into them.
    pub(crate) fn mapping(&mut self, m: &Mmap) {
        if m.prot & PROT_EXEC == 0 || m.len == 0 {
            return;
        }
        // Kept disjoint and sorted: merged with every range it overlaps or touches.
        let (mut start, mut end) = (m.start, m.start.saturating_add(m.len));
        let first = self.code.partition_point(|&(_, e)| e < start);
        let last = self.code.partition_point(|&(s, _)| s <= end);
        if first < last {
            start = start.min(self.code[first].0);
            end = end.max(self.code[last - 1].1);
        }
        self.code.splice(first..last, [(start, end)]);
    }

    /// Takes note of `sample`, whose stack copy was just encoded to end at `end` in `buf`, to
    /// be filtered when the frame closes.
    pub(crate) fn sample(&mut self, s: &Sample, buf: &[u8], end: usize) {
        if s.stack.is_empty() {
            return;
        }
        let Some(sp) = PerfRegs::get(s.regs_mask, &s.regs, self.sp_reg) else {
            return;
        };
        let Some(start) = end.checked_sub(s.stack.len()) else {
            return;
        };
        if buf.get(start..start + s.stack.len()) == Some(&s.stack[..]) {
            self.pending.push(Pending {
                start,
                len: s.stack.len(),
                sp,
            });
        }
    }

    /// Filters every stack copy noted since the last call, in place in the frame buffer.
    pub(crate) fn apply(&mut self, buf: &mut [u8]) {
        if !self.code.is_empty() {
            for p in &self.pending {
                if let Some(stack) = buf.get_mut(p.start..p.start + p.len) {
                    self.filter(stack, p.sp);
                }
            }
        }
        self.pending.clear();
    }

    /// Replaces the words of `stack` (copied from address `sp` up) that no unwinder follows.
    ///
    /// The hot loop of `rec` for deep stacks (every word of every copy): each word size is a
    /// loop of its own over fixed-size words, so reading and writing one is a load and a
    /// store, not a call to the C library's `memcpy` (musl's costs a `rep movs` start-up per
    /// word: four times the whole filter's time on a GStreamer pipeline's 32 KiB copies), and
    /// values outside every executable mapping's span skip the search.
    pub(crate) fn filter(&self, stack: &mut [u8], sp: u64) {
        let lo = sp.saturating_sub(SLACK);
        let hi = sp.saturating_add(stack.len() as u64).saturating_add(SLACK);
        let span = match (self.code.first(), self.code.last()) {
            (Some(first), Some(last)) => first.0..last.1,
            _ => 0..0,
        };
        let keep = |v: u64| {
            let a = v & self.address_mask;
            v == 0 || (lo..hi).contains(&v) || (span.contains(&a) && self.in_code(a))
        };
        let replace = |v: u64| if v < lo { self.low } else { self.high };
        match (self.word, self.big_endian) {
            (8, false) => words::<8>(stack, |w| {
                let v = u64::from_le_bytes(*w);
                if !keep(v) {
                    *w = replace(v).to_le_bytes();
                }
            }),
            (8, true) => words::<8>(stack, |w| {
                let v = u64::from_be_bytes(*w);
                if !keep(v) {
                    *w = replace(v).to_be_bytes();
                }
            }),
            (4, false) => words::<4>(stack, |w| {
                let v = u64::from(u32::from_le_bytes(*w));
                if !keep(v) {
                    *w = (replace(v) as u32).to_le_bytes();
                }
            }),
            (4, true) => words::<4>(stack, |w| {
                let v = u64::from(u32::from_be_bytes(*w));
                if !keep(v) {
                    *w = (replace(v) as u32).to_be_bytes();
                }
            }),
            _ => {}
        }
    }

    fn in_code(&self, v: u64) -> bool {
        let i = self.code.partition_point(|&(start, _)| start <= v);
        i > 0 && v < self.code[i - 1].1
    }
}

/// Calls `f` on each whole `N`-byte word of `bytes`.
fn words<const N: usize>(bytes: &mut [u8], mut f: impl FnMut(&mut [u8; N])) {
    for w in bytes.chunks_exact_mut(N) {
        if let Ok(w) = <&mut [u8; N]>::try_from(w) {
            f(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{End, FrameWriter, Reader, Record};

    fn header(arch: &str, pointer_size: u8, big_endian: bool) -> Header {
        Header {
            format_version: crate::FORMAT_VERSION,
            arch: arch.into(),
            pointer_size,
            big_endian,
            ..Default::default()
        }
    }

    fn exec(start: u64, len: u64) -> Mmap {
        Mmap {
            start,
            len,
            prot: 5,
            ..Default::default()
        }
    }

    fn words64(w: &[u64]) -> Vec<u8> {
        w.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    const SP: u64 = 0x7ffc_0000_1000;

    #[test]
    fn keeps_return_addresses_stack_pointers_and_zeros_only() {
        let mut f = StackFilter::new(&header("x86_64", 8, false)).unwrap();
        f.mapping(&exec(0x5555_0000_0000, 0x1000));
        f.mapping(&Mmap {
            prot: 3,
            ..exec(0x5555_0001_0000, 0x1000)
        });
        let input = [
            0x5555_0000_0123, // a return address
            SP + 0x40,        // a saved frame pointer
            0,
            42,               // a counter
            0x5555_0001_0010, // a pointer into data
            SP - 0x100,       // just below the stack pointer: still near the stack
            0xffff_8000_0000_0000,
        ];
        let mut stack = words64(&input);
        stack.push(0xab); // a tail shorter than a word stays
        f.filter(&mut stack, SP);
        let high = 0xffff_ffff_ffff_ff00;
        let expected = [input[0], input[1], 0, 1, 1, input[5], high];
        let mut want = words64(&expected);
        want.push(0xab);
        assert_eq!(stack, want);
    }

    #[test]
    fn mappings_merge_and_overlap() {
        let mut f = StackFilter::new(&header("x86_64", 8, false)).unwrap();
        f.mapping(&exec(0x3000, 0x1000));
        f.mapping(&exec(0x1000, 0x1000));
        f.mapping(&exec(0x1800, 0x2000));
        f.mapping(&exec(0x9000, 0x1000));
        assert_eq!(f.code, [(0x1000, 0x4000), (0x9000, 0xa000)]);
        assert!(f.in_code(0x1000) && f.in_code(0x3fff) && f.in_code(0x9abc));
        assert!(!f.in_code(0x4000) && !f.in_code(0xfff) && !f.in_code(0xa000));
    }

    #[test]
    fn signed_aarch64_return_addresses_and_32_bit_big_endian_words() {
        let mut f = StackFilter::new(&header("aarch64", 8, false)).unwrap();
        f.mapping(&exec(0xaaaa_0000_0000, 0x1000));
        let signed = 0x003d_aaaa_0000_0040;
        let mut stack = words64(&[signed, 7]);
        f.filter(&mut stack, 0xffff_f000_0000);
        assert_eq!(stack, words64(&[signed, 1]));

        let mut f = StackFilter::new(&header("arm", 4, true)).unwrap();
        f.mapping(&exec(0x0001_0000, 0x1000));
        let sp = 0xbeff_0000u64;
        let mut stack: Vec<u8> = [0x0001_0401u32, 0xbeff_0010, 5, 0xdead_beef]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        f.filter(&mut stack, sp);
        let want: Vec<u8> = [0x0001_0401u32, 0xbeff_0010, 1, 0xffff_ff00]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        assert_eq!(stack, want);
    }

    /// A sample whose mapping is written after it in the same frame is filtered with it; a
    /// stack copy is written whole while no executable mapping is known.
    #[test]
    fn the_writer_filters_when_the_frame_closes() {
        let sample = |time| {
            Record::Sample(Sample {
                time,
                pid: 1,
                tid: 1,
                regs_mask: 1 << 7,
                regs: vec![SP],
                stack: words64(&[0x40_1000, 9, SP + 8]),
                addr: 0x1234,
                ..Default::default()
            })
        };
        let mut w = FrameWriter::new(Vec::new(), &header("x86_64", 8, false)).unwrap();
        w.push(&sample(1)).unwrap();
        w.flush().unwrap();
        w.push(&sample(2)).unwrap();
        w.push(&Record::Mmap(exec(0x40_0000, 0x10_0000))).unwrap();
        let file = w.finish(End::default()).unwrap();
        let mut r = Reader::new(&file).unwrap();
        let mut stacks = Vec::new();
        while let Some(rec) = r.next_record() {
            if let Record::Sample(s) = rec {
                assert_eq!(s.addr, 0x1234);
                stacks.push(s.stack);
            }
        }
        assert_eq!(
            stacks,
            [
                words64(&[0x40_1000, 9, SP + 8]),
                words64(&[0x40_1000, 1, SP + 8])
            ]
        );
    }
}
