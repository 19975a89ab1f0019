//! Samples of events other than the recording's main one ([`EventSample`]).
//!
//! They have a tag of their own, not a field in [`Sample`]: a reader that predates them skips
//! the tag, instead of counting a context switch as CPU time.

use super::sample::Sample;
use crate::codec::{Dec, DecodeError, Enc};

/// One sample of a secondary event: the `context-switches` samples of `rec --off-cpu`, taken as
/// a thread leaves its CPU, whose stack is where it blocked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventSample {
    /// Index of the event in [`crate::Header::events`] (never 0, the main event, whose samples
    /// are [`Sample`] records).
    pub event: u32,
    /// The sample itself; `period` is the event's count since the previous sample (1 for
    /// context switches).
    pub sample: Sample,
}

impl EventSample {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.event.into());
        self.sample.encode(e);
    }

    /// Decodes an event sample; its registers and stack copy only when `stacks` is set.
    pub(super) fn decode(d: &mut Dec<'_>, stacks: bool) -> Result<Self, DecodeError> {
        EventSample::decode_split(d, None, stacks)
    }

    /// Decodes an event sample from `d`, or from its stub `d` and its bulk record `bulk`
    /// (see [`Sample::decode_split`]).
    pub(super) fn decode_split(
        d: &mut Dec<'_>,
        bulk: Option<&mut Dec<'_>>,
        stacks: bool,
    ) -> Result<Self, DecodeError> {
        Ok(EventSample {
            event: d.u32()?,
            sample: Sample::decode_split(d, bulk, stacks)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tag, Header, Record};
    use super::*;

    fn round_trip(r: &Record) -> Record {
        let mut buf = Vec::new();
        r.encode(&mut buf);
        let mut d = Dec::new(&buf[1..]);
        let payload = d.bytes().unwrap();
        Record::decode(buf[0], payload).unwrap()
    }

    #[test]
    fn event_samples_round_trip_with_their_stacks() {
        let r = Record::EventSample(EventSample {
            event: 1,
            sample: Sample {
                time: 77,
                pid: 5,
                tid: 6,
                period: 1,
                kernel_chain: vec![0xffff_ffff_8100_0000],
                regs_mask: 0b11,
                regs: vec![0x7ffc_0000, 0x401000],
                stack: vec![9; 40],
                ..Default::default()
            },
        });
        assert_eq!(round_trip(&r), r);
    }

    #[test]
    fn fault_addresses_survive_with_and_without_stack_copies() {
        let s = Sample {
            time: 5,
            pid: 1,
            tid: 1,
            period: 1,
            regs_mask: 0b1,
            regs: vec![0x7ffc_0000],
            stack: vec![1, 2, 3],
            addr: 0x7f00_1234_5000,
            ..Default::default()
        };
        let r = Record::Sample(s.clone());
        assert_eq!(round_trip(&r), r);
        let mut buf = Vec::new();
        r.encode(&mut buf);
        let mut d = Dec::new(&buf[1..]);
        let payload = d.bytes().unwrap();
        let opts = crate::DecodeOptions {
            sample_stacks: false,
            heap_events: false,
            part: crate::Part::Metadata,
        };
        let Record::Sample(m) = Record::decode_with(tag::SAMPLE, payload, opts).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!((m.addr, m.stack.len(), m.regs.len()), (s.addr, 0, 0));
        // Without an address the sample is laid out as before the field existed.
        let plain = Record::Sample(Sample { addr: 0, ..s });
        let mut old = Vec::new();
        plain.encode(&mut old);
        assert!(old.len() < buf.len());
        assert_eq!(round_trip(&plain), plain);
    }

    #[test]
    fn headers_keep_their_event_list_and_older_headers_still_decode() {
        let h = Header {
            event: "cpu-clock".into(),
            events: vec!["cpu-clock".into(), "context-switches".into()],
            off_cpu: "exact".into(),
            ..Default::default()
        };
        assert_eq!(round_trip(&Record::Header(h.clone())), Record::Header(h));
        // A header as written before the event list existed: its payload ends at `event`.
        let old = Header {
            event: "cpu-clock".into(),
            ..Default::default()
        };
        let mut buf = Vec::new();
        Record::Header(old.clone()).encode(&mut buf);
        let mut d = Dec::new(&buf[1..]);
        let payload = d.bytes().unwrap();
        // An empty list and an empty string, then segment 0, its start 0, the heap
        // sampling mean 0 and an empty heap-stack kind (appended in that order).
        let cut = &payload[..payload.len() - 6];
        assert_eq!(
            Record::decode(tag::HEADER, cut).unwrap(),
            Record::Header(old.clone())
        );
        // Written before segments existed: ends at `off_cpu`.
        let cut = &payload[..payload.len() - 4];
        assert_eq!(
            Record::decode(tag::HEADER, cut).unwrap(),
            Record::Header(old.clone())
        );
        // Written before sampled heap recordings: ends at the segment's start.
        let cut = &payload[..payload.len() - 2];
        assert_eq!(
            Record::decode(tag::HEADER, cut).unwrap(),
            Record::Header(old.clone())
        );
        // Written before ARMv7's sparse heap stacks: ends at the sampling mean.
        let cut = &payload[..payload.len() - 1];
        assert_eq!(
            Record::decode(tag::HEADER, cut).unwrap(),
            Record::Header(old)
        );
        let sparse = Header {
            heap_stacks: crate::HEAP_STACKS_ARM_SPARSE.into(),
            ..Default::default()
        };
        assert_eq!(
            round_trip(&Record::Header(sparse.clone())),
            Record::Header(sparse)
        );
    }
}
