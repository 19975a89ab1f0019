//! Decoding the kernel's perf records into crossprof records.
//!
//! Only the record types `rec` asks for are decoded; everything is bounds-checked, so a record
//! the kernel lays out differently than expected is skipped, never misread past its end.

use crossprof_format::{callchain, Comm, Lost, Mmap, Record, Sample, Switch, Task};

use super::tracepoint::RawField;

const RECORD_MMAP2: u32 = 10;
const RECORD_LOST: u32 = 2;
const RECORD_COMM: u32 = 3;
const RECORD_EXIT: u32 = 4;
const RECORD_FORK: u32 = 7;
const RECORD_SAMPLE: u32 = 9;
const RECORD_SWITCH: u32 = 14;
const RECORD_SWITCH_CPU_WIDE: u32 = 15;

const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// On SWITCH records: the task left the CPU (else it entered it).
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// On switch-out records: the task was still runnable (preempted), not waiting.
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;

/// Bytes of the `sample_id_all` trailer: pid/tid, time, cpu/reserved.
const ID_TRAILER: usize = 24;

/// A bounds-checked little cursor over one record.
struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn u32(&mut self) -> Option<u32> {
        let v = self.b.get(self.at..self.at + 4)?;
        self.at += 4;
        Some(u32::from_ne_bytes(v.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        let v = self.b.get(self.at..self.at + 8)?;
        self.at += 8;
        Some(u64::from_ne_bytes(v.try_into().ok()?))
    }
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let v = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(v)
    }
    /// A NUL-terminated string padded to 8 bytes, ending before the id trailer.
    fn cstr_before_trailer(&mut self) -> Option<String> {
        let end = self.b.len().checked_sub(ID_TRAILER)?;
        let s = self.b.get(self.at..end)?;
        let n = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        Some(String::from_utf8_lossy(&s[..n]).into_owned())
    }
    /// The `sample_id_all` trailer: pid, tid, time and cpu.
    fn trailer(&self) -> Option<(u32, u32, u64, u32)> {
        let at = self.b.len().checked_sub(ID_TRAILER)?;
        let mut t = Cur { b: self.b, at };
        Some((t.u32()?, t.u32()?, t.u64()?, t.u32()?))
    }
    fn trailer_time(&self) -> u64 {
        let at = self.b.len().saturating_sub(ID_TRAILER) + 8;
        self.b
            .get(at..at + 8)
            .and_then(|v| v.try_into().ok())
            .map(u64::from_ne_bytes)
            .unwrap_or(0)
    }
}

/// The optional parts of sample records, as the events were opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout {
    /// `sample_regs_user` (0: no registers).
    pub regs_mask: u64,
    /// Whether samples carry a user stack copy.
    pub stack: bool,
    /// Whether samples carry a data address (fault events).
    pub addr: bool,
    /// Samples carry raw tracepoint data with this field, which becomes the sample's `addr`
    /// (a wakeup's woken thread, a system call's number or return value).
    pub raw: Option<RawField>,
    /// Samples carry no call chain (events sampled only for their time and raw data).
    pub no_callchain: bool,
}

/// Whether `raw` is a SAMPLE record (for [`decode_sample_into`]).
pub fn is_sample(raw: &[u8]) -> bool {
    raw.get(0..4) == Some(&RECORD_SAMPLE.to_ne_bytes()[..])
}

/// Whether `raw` is of a record type [`decode`] handles: such a record that does not decode
/// is damaged (and counted), any other type is simply not wanted.
pub fn is_handled(raw: &[u8]) -> bool {
    let ty = raw
        .get(0..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_ne_bytes);
    matches!(
        ty,
        Some(
            RECORD_SAMPLE
                | RECORD_MMAP2
                | RECORD_COMM
                | RECORD_FORK
                | RECORD_EXIT
                | RECORD_LOST
                | RECORD_SWITCH
                | RECORD_SWITCH_CPU_WIDE
        )
    )
}

/// Decodes a raw SAMPLE record (header included) into `s`, reusing its buffers: the drain
/// loop keeps one `Sample` for every record, so decoding allocates nothing (musl's allocator
/// mapped and unmapped a page group for nearly every stack copy otherwise: 4,000 `munmap` a
/// second, some of them 70 ms long). False when the record does not decode; `s` is then
/// partly overwritten.
pub fn decode_sample_into(raw: &[u8], layout: Layout, s: &mut Sample) -> bool {
    sample_into(raw, layout, s).is_some()
}

fn sample_into(raw: &[u8], layout: Layout, s: &mut Sample) -> Option<()> {
    let mut c = Cur { b: raw, at: 8 };
    let _ip = c.u64()?;
    s.pid = c.u32()?;
    s.tid = c.u32()?;
    s.time = c.u64()?;
    s.addr = if layout.addr { c.u64()? } else { 0 };
    s.cpu = c.u32()?;
    let _res = c.u32()?;
    s.period = c.u64()?;
    let nr = if layout.no_callchain {
        0
    } else {
        c.u64()? as usize
    };
    let ips = c.bytes(nr.checked_mul(8)?)?;
    s.kernel_chain.clear();
    s.user_chain.clear();
    let words = ips.chunks_exact(8).map(|w| {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        u64::from_ne_bytes(b)
    });
    callchain::split(words, &mut s.kernel_chain, &mut s.user_chain);
    if let Some(field) = layout.raw {
        let n = c.u32()? as usize;
        s.addr = field.read(c.bytes(n)?)?;
    }
    s.regs_mask = 0;
    s.regs.clear();
    s.stack.clear();
    if layout.regs_mask != 0 {
        // ABI 0: no user registers (a kernel thread).
        if c.u64()? != 0 {
            s.regs_mask = layout.regs_mask;
            for _ in 0..layout.regs_mask.count_ones() {
                s.regs.push(c.u64()?);
            }
        }
    }
    if layout.stack {
        let size = c.u64()? as usize;
        if size > 0 {
            let data = c.bytes(size)?;
            // Only what the kernel found in use; the rest is padding.
            let used = (c.u64()? as usize).min(size);
            s.stack.extend_from_slice(&data[..used]);
        }
    }
    Some(())
}

/// Decodes one raw record (header included). MMAP2 records without a kernel-provided build-id
/// come back with an empty `build_id` for the caller to fill in.
pub fn decode(raw: &[u8], layout: Layout) -> Option<Record> {
    let ty = u32::from_ne_bytes(raw.get(0..4)?.try_into().ok()?);
    let misc = u16::from_ne_bytes(raw.get(4..6)?.try_into().ok()?);
    let mut c = Cur { b: raw, at: 8 };
    match ty {
        RECORD_SAMPLE => {
            let mut s = Sample::default();
            decode_sample_into(raw, layout, &mut s).then_some(Record::Sample(s))
        }
        RECORD_MMAP2 => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            let start = c.u64()?;
            let len = c.u64()?;
            let pgoff = c.u64()?;
            let mut build_id = Vec::new();
            let mut inode = 0;
            if misc & MISC_MMAP_BUILD_ID != 0 {
                let id = c.bytes(24)?;
                let n = (id[0] as usize).min(20);
                build_id.extend_from_slice(&id[4..4 + n]);
            } else {
                let _maj = c.u32()?;
                let _min = c.u32()?;
                inode = c.u64()?;
                let _gen = c.u64()?;
            }
            let prot = c.u32()?;
            let _flags = c.u32()?;
            let path = c.cstr_before_trailer()?;
            Some(Record::Mmap(Mmap {
                time: c.trailer_time(),
                pid,
                tid,
                start,
                len,
                pgoff,
                path,
                build_id,
                prot,
                inode,
                ..Default::default()
            }))
        }
        RECORD_COMM => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            let comm = c.cstr_before_trailer()?;
            Some(Record::Comm(Comm {
                time: c.trailer_time(),
                pid,
                tid,
                comm,
                exec: misc & MISC_COMM_EXEC != 0,
            }))
        }
        RECORD_FORK | RECORD_EXIT => {
            let pid = c.u32()?;
            let ppid = c.u32()?;
            let tid = c.u32()?;
            let ptid = c.u32()?;
            let time = c.u64()?;
            let t = Task {
                time,
                pid,
                tid,
                ppid,
                ptid,
            };
            Some(if ty == RECORD_FORK {
                Record::Fork(t)
            } else {
                Record::Exit(t)
            })
        }
        RECORD_SWITCH | RECORD_SWITCH_CPU_WIDE => {
            // The body (the other task, for CPU-wide events) is not needed: the trailer says
            // which thread switched, when and where.
            let (pid, tid, time, cpu) = c.trailer()?;
            if raw.len() < 8 + ID_TRAILER {
                return None;
            }
            let out = misc & MISC_SWITCH_OUT != 0;
            Some(Record::Switch(Switch {
                time,
                pid,
                tid,
                cpu,
                out,
                preempt: out && misc & MISC_SWITCH_OUT_PREEMPT != 0,
            }))
        }
        RECORD_LOST => {
            let _id = c.u64()?;
            let count = c.u64()?;
            Some(Record::Lost(Lost {
                time: c.trailer_time(),
                count,
                kind: "samples".into(),
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossprof_format::callchain::{CONTEXT_KERNEL, CONTEXT_USER};

    fn rec(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(&misc.to_ne_bytes());
        v.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn sample_splits_kernel_and_user_chains() {
        let mut b = Vec::new();
        b.extend_from_slice(&0x1000u64.to_ne_bytes());
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&8u32.to_ne_bytes());
        b.extend_from_slice(&99u64.to_ne_bytes());
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&1000u64.to_ne_bytes());
        let chain = [CONTEXT_KERNEL, 0xffff_0001, CONTEXT_USER, 0x1000, 0x2000];
        b.extend_from_slice(&(chain.len() as u64).to_ne_bytes());
        for w in chain {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        let Some(Record::Sample(s)) = decode(&rec(RECORD_SAMPLE, 0, &b), Layout::default()) else {
            panic!("not a sample")
        };
        assert_eq!((s.pid, s.tid, s.time, s.cpu, s.period), (7, 8, 99, 1, 1000));
        assert_eq!(s.kernel_chain, vec![0xffff_0001]);
        assert_eq!(s.user_chain, vec![0x1000, 0x2000]);
    }

    #[test]
    fn stack_copies_keep_only_the_used_bytes() {
        let mut b = Vec::new();
        for w in [0x1000u64, (8u64 << 32) | 7, 99, 1, 1000, 0] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        // Registers: ABI 2 (64-bit), three values for a three-bit mask.
        for w in [2u64, 0x10, 0x20, 0x30] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        // Stack: 16 bytes copied, 5 in use.
        b.extend_from_slice(&16u64.to_ne_bytes());
        b.extend_from_slice(&[1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&5u64.to_ne_bytes());
        let layout = Layout {
            regs_mask: 0b111,
            stack: true,
            addr: false,
            raw: None,
            no_callchain: false,
        };
        let Some(Record::Sample(s)) = decode(&rec(RECORD_SAMPLE, 0, &b), layout) else {
            panic!("not a sample")
        };
        assert_eq!(s.regs_mask, 0b111);
        assert_eq!(s.regs, vec![0x10, 0x20, 0x30]);
        assert_eq!(s.stack, vec![1, 2, 3, 4, 5]);
        // A dyn_size beyond the copy is clamped, never trusted.
        let n = b.len();
        b[n - 8..].copy_from_slice(&1000u64.to_ne_bytes());
        let Some(Record::Sample(s)) = decode(&rec(RECORD_SAMPLE, 0, &b), layout) else {
            panic!("not a sample")
        };
        assert_eq!(s.stack.len(), 16);
    }

    #[test]
    fn a_reused_sample_keeps_nothing_of_the_previous_one() {
        let layout = Layout {
            regs_mask: 0b11,
            stack: true,
            addr: false,
            raw: None,
            no_callchain: false,
        };
        let sample = |abi: u64, stack: &[u8], chain: &[u64]| {
            let mut b = Vec::new();
            for w in [0x1000u64, (8u64 << 32) | 7, 99, 1, 1000, chain.len() as u64] {
                b.extend_from_slice(&w.to_ne_bytes());
            }
            for w in chain {
                b.extend_from_slice(&w.to_ne_bytes());
            }
            b.extend_from_slice(&abi.to_ne_bytes());
            if abi != 0 {
                for w in [0x10u64, 0x20] {
                    b.extend_from_slice(&w.to_ne_bytes());
                }
            }
            b.extend_from_slice(&(stack.len() as u64).to_ne_bytes());
            b.extend_from_slice(stack);
            if !stack.is_empty() {
                b.extend_from_slice(&(stack.len() as u64).to_ne_bytes());
            }
            rec(RECORD_SAMPLE, 0, &b)
        };
        assert!(is_sample(&sample(2, &[1; 8], &[])));
        let mut s = Sample::default();
        let first = sample(2, &[1, 2, 3, 4, 5, 6, 7, 8], &[CONTEXT_KERNEL, 0xffff_0001]);
        assert!(decode_sample_into(&first, layout, &mut s));
        assert_eq!(
            (s.regs.len(), s.stack.len(), s.kernel_chain.len()),
            (2, 8, 1)
        );
        // A kernel thread's sample: no registers, no stack, no chain.
        assert!(decode_sample_into(&sample(0, &[], &[]), layout, &mut s));
        assert_eq!(s.regs_mask, 0);
        assert!(s.regs.is_empty() && s.stack.is_empty() && s.kernel_chain.is_empty());
        // The same as a fresh decode.
        let Some(Record::Sample(fresh)) = decode(&first, layout) else {
            panic!("not a sample")
        };
        assert!(decode_sample_into(&first, layout, &mut s));
        assert_eq!(s, fresh);
        assert!(!decode_sample_into(&first[..40], layout, &mut s));
    }

    #[test]
    fn a_wakeup_sample_names_the_woken_thread_from_its_raw_data() {
        let mut b = Vec::new();
        for w in [0x1000u64, (8u64 << 32) | 7, 99, 1, 1, 0] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        // Raw data: a u32 size, then the tracepoint's fields (the woken tid at offset 8).
        b.extend_from_slice(&12u32.to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&4242u32.to_ne_bytes());
        let layout = Layout {
            raw: Some(RawField {
                offset: 8,
                size: 4,
                signed: true,
            }),
            ..Layout::default()
        };
        let Some(Record::Sample(s)) = decode(&rec(RECORD_SAMPLE, 0, &b), layout) else {
            panic!("not a sample")
        };
        assert_eq!((s.tid, s.addr), (8, 4242));
        // An offset past the raw data: not decodable, never read past it.
        let layout = Layout {
            raw: Some(RawField {
                offset: 10,
                size: 4,
                signed: true,
            }),
            ..Layout::default()
        };
        assert_eq!(decode(&rec(RECORD_SAMPLE, 0, &b), layout), None);
    }

    #[test]
    fn a_system_call_exit_has_no_chain_and_a_signed_return_value() {
        let mut b = Vec::new();
        // IP, pid and tid, time, CPU, period: no chain follows.
        for w in [0x1000u64, (8u64 << 32) | 7, 99, 1, 1] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        // Raw data: common fields, then `long id` and `long ret` (EBADF).
        b.extend_from_slice(&24u32.to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&1i64.to_ne_bytes());
        b.extend_from_slice(&(-9i64).to_ne_bytes());
        let layout = Layout {
            raw: Some(RawField {
                offset: 16,
                size: 8,
                signed: true,
            }),
            no_callchain: true,
            ..Layout::default()
        };
        let Some(Record::Sample(s)) = decode(&rec(RECORD_SAMPLE, 0, &b), layout) else {
            panic!("not a sample")
        };
        assert_eq!((s.time, s.addr as i64), (99, -9));
        assert!(s.kernel_chain.is_empty() && s.user_chain.is_empty());
    }

    #[test]
    fn switch_records_come_from_the_trailer() {
        let mut b = Vec::new();
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&8u32.to_ne_bytes());
        b.extend_from_slice(&12345u64.to_ne_bytes());
        b.extend_from_slice(&3u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        let out = MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT;
        let Some(Record::Switch(s)) = decode(&rec(RECORD_SWITCH, out, &b), Layout::default())
        else {
            panic!("not a switch")
        };
        assert_eq!((s.pid, s.tid, s.time, s.cpu), (7, 8, 12345, 3));
        assert!(s.out && s.preempt);
        // A CPU-wide switch-in: the other task's ids come first.
        let mut wide = vec![0u8; 8];
        wide.extend_from_slice(&b);
        let Some(Record::Switch(s)) = decode(
            &rec(RECORD_SWITCH_CPU_WIDE, MISC_SWITCH_OUT_PREEMPT, &wide),
            Layout::default(),
        ) else {
            panic!("not a switch")
        };
        assert_eq!((s.tid, s.time), (8, 12345));
        assert!(!s.out && !s.preempt);
        assert_eq!(
            decode(&rec(RECORD_SWITCH, 0, &b[..16]), Layout::default()),
            None
        );
    }

    #[test]
    fn truncated_records_are_skipped() {
        let r = rec(RECORD_SAMPLE, 0, &[0; 12]);
        assert_eq!(decode(&r, Layout::default()), None);
        // Counted as damaged, unlike a record type rec does not ask for (THROTTLE, 5).
        assert!(is_handled(&r));
        assert!(!is_handled(&rec(5, 0, &[0; 16])));
        assert!(!is_handled(&[1, 2]));
        assert_eq!(decode(&[1, 2, 3], Layout::default()), None);
        // A sample whose chain length runs past the record.
        let mut b = vec![0u8; 40];
        b.extend_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(decode(&rec(RECORD_SAMPLE, 0, &b), Layout::default()), None);
    }
}
