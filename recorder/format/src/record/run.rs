//! Records about the run itself: the [`Header`] that opens a recording, the [`End`] that closes
//! it, what was [`Lost`] on the way, and memory images copied from the board ([`Blob`]).

use crate::codec::{Dec, DecodeError, Enc};

/// The recording's first record: what machine and what run produced it. Without it, addresses
/// and stack bytes cannot be interpreted, so a reader refuses a file that does not start with it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// [`crate::FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// Target architecture, in the names of [`crate::Arch`] (`x86_64`, `aarch64`, `arm`, ...).
    pub arch: String,
    /// Whether multi-byte values in raw memory (stack copies, the vDSO) are big-endian.
    pub big_endian: bool,
    /// Pointer size on the target in bytes (4 or 8).
    pub pointer_size: u8,
    /// Page size on the target in bytes.
    pub page_size: u32,
    /// `uname -r` of the board.
    pub kernel_release: String,
    /// `uname -n` of the board.
    pub hostname: String,
    /// The profiled command line, or `["-p", "PID"]` when attaching.
    pub command: Vec<String>,
    /// The clock sample times are taken from (`monotonic` for perf's default clock).
    pub clock: String,
    /// Wall-clock start time, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// The same instant on `clock`, so sample times can be turned into wall time.
    pub start_clock_ns: u64,
    /// Requested sampling frequency in Hz (0 when CPU sampling is off).
    pub sample_freq: u32,
    /// Call-graph mode, e.g. `fp` or `dwarf=8192`.
    pub call_graph: String,
    /// Version of the `rec` that wrote the file.
    pub rec_version: String,
    /// The perf event that drove sampling, e.g. `cpu-clock`.
    pub event: String,
    /// Every event the recording sampled, for [`crate::EventSample::event`] to index: the
    /// first is `event`, the others are sampled alongside it (the `context-switches` of
    /// `rec --off-cpu`). Empty in files written before it existed: only `event` was sampled.
    pub events: Vec<String>,
    /// How off-CPU stacks were recorded: empty when context switches were not recorded,
    /// `exact` when each switch-out carries the stack it blocked in (a `context-switches`
    /// [`crate::EventSample`]), `approximate` when the kernel allowed only the switch times
    /// (`perf_event_paranoid` 2), so the host takes the thread's last on-CPU sample instead.
    pub off_cpu: String,
    /// Which segment of a `rec --max-size` recording this file is: 0 for the first (and for
    /// a recording in one file), then 1, 2, ... Each segment starts with a header and the
    /// state of the processes, so it can be read alone; `start_unix_ns` and `start_clock_ns`
    /// stay the recording's, and tell segments of the same recording apart from others.
    pub segment: u32,
    /// When this segment began, on `clock` (0 in segment 0: `start_clock_ns`).
    pub segment_start_ns: u64,
    /// `rec --heap-sample`: the mean bytes between sampled allocations (0: every allocation
    /// was recorded, and in files written before it existed). A sampled allocation of `s`
    /// bytes was recorded with probability `1 - exp(-s / heap_sample_bytes)`.
    pub heap_sample_bytes: u64,
    /// What the heap stacks' trace-tree nodes hold: empty for return addresses (and in files
    /// written before it existed), `arm-sparse` for ARMv7's entry registers and stack words,
    /// to be unwound on the host (`crossprof_heap_wire::sparse`).
    pub heap_stacks: String,
}

/// [`Header::heap_stacks`] of an ARMv7 heap recording.
pub const HEAP_STACKS_ARM_SPARSE: &str = "arm-sparse";

impl Header {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.format_version.into());
        e.str(&self.arch);
        e.bool(self.big_endian);
        e.u64(self.pointer_size.into());
        e.u64(self.page_size.into());
        e.str(&self.kernel_release);
        e.str(&self.hostname);
        e.strs(&self.command);
        e.str(&self.clock);
        e.u64(self.start_unix_ns);
        e.u64(self.start_clock_ns);
        e.u64(self.sample_freq.into());
        e.str(&self.call_graph);
        e.str(&self.rec_version);
        e.str(&self.event);
        e.strs(&self.events);
        e.str(&self.off_cpu);
        e.u64(self.segment.into());
        e.u64(self.segment_start_ns);
        e.u64(self.heap_sample_bytes);
        e.str(&self.heap_stacks);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let mut h = Header {
            format_version: d.u32()?,
            arch: d.string()?,
            big_endian: d.bool()?,
            pointer_size: d.u64()? as u8,
            page_size: d.u32()?,
            kernel_release: d.string()?,
            hostname: d.string()?,
            command: d.strs()?,
            clock: d.string()?,
            start_unix_ns: d.u64()?,
            start_clock_ns: d.u64()?,
            sample_freq: d.u32()?,
            call_graph: d.string()?,
            rec_version: d.string()?,
            event: d.string()?,
            ..Default::default()
        };
        // Appended fields; older files end before them.
        if d.remaining() > 0 {
            h.events = d.strs()?;
            h.off_cpu = d.string()?;
        }
        if d.remaining() > 0 {
            h.segment = d.u32()?;
            h.segment_start_ns = d.u64()?;
        }
        if d.remaining() > 0 {
            h.heap_sample_bytes = d.u64()?;
        }
        if d.remaining() > 0 {
            h.heap_stacks = d.string()?;
        }
        Ok(h)
    }
}

/// Events the kernel or the recorder had to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// How many records were lost.
    pub count: u64,
    /// What was lost: `samples` (kernel ring buffer overflow), `heap` (interposer queue full),
    /// or what `rec` itself could not record: `undecodable` (perf records of a wanted type it
    /// could not decode), `resync` (perf rings skipped to their head after an impossible
    /// record header; the count is of resynchronizations) and `enable-failed` (perf events
    /// that could not be enabled when attaching) and `heap-rings-unreadable` (interposer rings
    /// rec refused or could not read: those processes' heap events are missing) and
    /// `untracked-process` (`rec -a` met more processes at once than it tracks and did not
    /// read their maps from /proc); and `rec`'s durability errors, running totals (see
    /// [`Lost::RUNNING_TOTALS`]): `segment-delete-failed`, `directory-sync-failed`, and what
    /// a `--max-size` segment could not carry of the heap's state, `heap-node-not-carried`
    /// and `heap-block-not-carried`.
    pub kind: String,
}

impl Lost {
    /// Kinds whose count is a running total since the recording began, written again at the
    /// start of every `--max-size` segment so that it outlives the segment that first told
    /// it: a reader takes the largest count of these, and sums the others.
    pub const RUNNING_TOTALS: [&'static str; 4] = [
        Self::SEGMENT_DELETE_FAILED,
        Self::DIRECTORY_SYNC_FAILED,
        Self::HEAP_NODE_NOT_CARRIED,
        Self::HEAP_BLOCK_NOT_CARRIED,
    ];
    /// Heap trace-tree nodes past rec's bound, not written again into new segments (a
    /// running total): allocations that refer to them have an unknown stack there.
    pub const HEAP_NODE_NOT_CARRIED: &'static str = "heap-node-not-carried";
    /// Live heap blocks rec had stopped tracking (`--heap-max-live`), so not carried into
    /// new segments (a running total, an upper bound).
    pub const HEAP_BLOCK_NOT_CARRIED: &'static str = "heap-block-not-carried";
    /// The kind of `rec`'s failed deletes of old `--max-size` segments (a running total).
    pub const SEGMENT_DELETE_FAILED: &'static str = "segment-delete-failed";
    /// The kind of `rec`'s failed directory syncs after a segment was created or deleted (a
    /// running total).
    pub const DIRECTORY_SYNC_FAILED: &'static str = "directory-sync-failed";

    /// Adds this record to `totals`, counts by kind, as [`Lost::RUNNING_TOTALS`] says.
    pub fn tally(&self, totals: &mut std::collections::BTreeMap<String, u64>) {
        let n = totals.entry(self.kind.clone()).or_default();
        *n = if Self::RUNNING_TOTALS.contains(&self.kind.as_str()) {
            (*n).max(self.count)
        } else {
            n.saturating_add(self.count)
        };
    }

    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.count);
        e.str(&self.kind);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Lost {
            time: d.u64()?,
            count: d.u64()?,
            kind: d.string()?,
        })
    }
}

/// A copy of a memory image the host cannot find on disk: the vDSO (`name == "[vdso]"`), or
/// `/proc/kallsyms` (`name == "kallsyms"`, text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// What the bytes are.
    pub name: String,
    /// Load address of the image on the board (0 when not an image).
    pub addr: u64,
    /// The bytes.
    pub data: Vec<u8>,
}

impl Blob {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.str(&self.name);
        e.u64(self.addr);
        e.bytes(&self.data);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Blob {
            name: d.string()?,
            addr: d.u64()?,
            data: d.bytes()?.to_vec(),
        })
    }
}

/// The last record of a recording that ended normally. A file without it is incomplete (the
/// recorder was killed or the board lost power) but everything before the cut is still valid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct End {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// The application's exit status as `rec` returns it (128+N for signal N), -1 if unknown.
    pub exit_status: i64,
    /// Samples written.
    pub samples: u64,
    /// Samples the kernel reported as lost.
    pub lost_samples: u64,
}

impl End {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.i64(self.exit_status);
        e.u64(self.samples);
        e.u64(self.lost_samples);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(End {
            time: d.u64()?,
            exit_status: d.i64()?,
            samples: d.u64()?,
            lost_samples: d.u64()?,
        })
    }
}
