//! Records about CPU time: samples ([`Sample`]) and context switches ([`Switch`]).

use crate::codec::{Dec, DecodeError, Enc};

/// One CPU sample: where a thread was when the sampling timer fired.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU the sample was taken on.
    pub cpu: u32,
    /// The sampling period this sample stands for (nanoseconds for cpu-clock).
    pub period: u64,
    /// Kernel frames, innermost first (the first one is the interrupted kernel address).
    pub kernel_chain: Vec<u64>,
    /// User frames, innermost first. The first is the interrupted instruction pointer, the rest
    /// are return addresses (look them up at address-1). Empty in stack-copy mode, where the
    /// host unwinds from `regs` and `stack` instead.
    pub user_chain: Vec<u64>,
    /// Which user registers `regs` holds, as perf's `sample_regs_user` mask for the header's
    /// architecture (bit N = perf register N of that arch). 0 when none were captured.
    pub regs_mask: u64,
    /// The captured user registers, one per set bit of `regs_mask`, lowest bit first.
    pub regs: Vec<u64>,
    /// A copy of the user stack from the sampled stack pointer upward: only the bytes the
    /// kernel reported as in use (`dyn_size`), never the padding. Empty unless
    /// `--call-graph dwarf`. In a file, the words that no unwinder follows (neither zero, nor
    /// in executable code, nor near the stack) are replaced by constants (see the writer's
    /// stack filter): the copy is for unwinding, not for reading the program's locals.
    pub stack: Vec<u8>,
    /// The data address the event names: the faulting address of a page-fault event. 0 for
    /// other events (and in files written before it existed).
    pub addr: u64,
}

impl Sample {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        self.encode_head(e);
        self.encode_stacks(e);
        if self.addr != 0 {
            e.u64(self.addr);
        }
    }

    /// The fields before the call chains: time, thread, CPU and period.
    fn encode_head(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.u64(self.cpu.into());
        e.u64(self.period);
    }

    /// The call chains, registers and stack copy: what a bulk frame holds of a sample (see
    /// `pairs`), the stack copy last.
    pub(crate) fn encode_stacks(&self, e: &mut Enc<'_>) {
        e.u64s(&self.kernel_chain);
        e.u64s(&self.user_chain);
        e.u64(self.regs_mask);
        e.u64s(&self.regs);
        e.bytes(&self.stack);
    }

    /// Where the fields [`Sample::encode_stacks`] writes lie in an encoded sample: the
    /// offsets of their start and end in `payload` (after `skip` leading values, the event of
    /// an event sample).
    pub(crate) fn stacks_span(payload: &[u8], skip: usize) -> Result<(usize, usize), DecodeError> {
        let mut d = Dec::new(payload);
        for _ in 0..skip + 5 {
            d.u64()?;
        }
        let start = d.position();
        d.u64s()?;
        d.u64s()?;
        d.u64()?;
        d.u64s()?;
        d.bytes()?;
        Ok((start, d.position()))
    }

    /// Decodes a sample; its registers and stack copy only when `stacks` is set.
    pub(super) fn decode(d: &mut Dec<'_>, stacks: bool) -> Result<Self, DecodeError> {
        Sample::decode_split(d, None, stacks)
    }

    /// Decodes a sample from `d`, or from its stub `d` and the bulk record `bulk` holding its
    /// chains, registers and stack copy (see `pairs`); its registers and stack copy only
    /// when `stacks` is set.
    pub(crate) fn decode_split(
        d: &mut Dec<'_>,
        bulk: Option<&mut Dec<'_>>,
        stacks: bool,
    ) -> Result<Self, DecodeError> {
        let mut s = Sample {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            cpu: d.u32()?,
            period: d.u64()?,
            ..Default::default()
        };
        match bulk {
            Some(b) => {
                // The stub's own (empty) fields.
                Sample::decode_stacks(d, false, &mut Sample::default())?;
                Sample::decode_stacks(b, stacks, &mut s)?;
            }
            None => Sample::decode_stacks(d, stacks, &mut s)?,
        }
        // The data address was appended after the stack copy.
        if d.remaining() > 0 {
            s.addr = d.u64()?;
        }
        Ok(s)
    }

    /// Decodes the fields [`Sample::encode_stacks`] writes into `s`.
    fn decode_stacks(d: &mut Dec<'_>, stacks: bool, s: &mut Sample) -> Result<(), DecodeError> {
        s.kernel_chain = d.u64s()?;
        s.user_chain = d.u64s()?;
        // Stack-copy fields were appended to the record; older files end before them.
        if d.remaining() > 0 {
            let (mask, regs, stack) = (d.u64()?, d.u64s()?, d.bytes()?);
            if stacks {
                s.regs_mask = mask;
                s.regs = regs;
                s.stack = stack.to_vec();
            }
        }
        Ok(())
    }
}

/// A thread leaving or entering a CPU, for off-CPU analysis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU.
    pub cpu: u32,
    /// True when the thread was switched out.
    pub out: bool,
    /// True when it was switched out while still runnable (preempted, not waiting).
    pub preempt: bool,
}

impl Switch {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.u64(self.cpu.into());
        e.bool(self.out);
        e.bool(self.preempt);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Switch {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            cpu: d.u32()?,
            out: d.bool()?,
            preempt: d.bool()?,
        })
    }
}
