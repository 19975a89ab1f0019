//! `perf.data`, for `perf report`, `perf script` and hotspot: the samples with the call chains
//! hostside unwound (kernel part, then user part, innermost first), the threads' names, the
//! profiled modules' mappings and perf's build-id table, so those tools symbolize the frames
//! themselves (`--symfs SYSROOT`) whatever the board's architecture.
//!
//! Written by hand: no crate writes the format. What is written is the subset every perf since
//! 3.x reads (tools/perf/Documentation/perf.data-file-format.txt): one software `cpu-clock`
//! event (or the recording's event, as a raw count) sampling IP, TID, TIME, CPU, PERIOD and
//! CALLCHAIN; `COMM` and `MMAP2` records first, then the samples in time order; the
//! `BUILD_ID`, `HOSTNAME`, `OSRELEASE`, `VERSION`, `ARCH`, `NRCPUS`, `CMDLINE` and
//! `SAMPLE_TIME` feature sections. Kernel frames keep their addresses, but perf has no kernel
//! symbols for another machine, so it shows them as `[unknown]`.

use std::io::Write;

use anyhow::Result;
use crossprof_format::callchain::{CONTEXT_KERNEL, CONTEXT_USER};

use crate::output::context::ReportContext;
use crate::output::export::Sampled;

/// Bytes of `struct perf_event_attr` written (`PERF_ATTR_SIZE_VER5`).
const ATTR_SIZE: usize = 112;
/// Bytes of the file header.
const HEADER_SIZE: u64 = 104;

/// `PERF_SAMPLE_*`.
const SAMPLE_IP: u64 = 1;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
const SAMPLE_CPU: u64 = 1 << 7;
const SAMPLE_PERIOD: u64 = 1 << 8;

/// `PERF_RECORD_*`.
const RECORD_COMM: u32 = 3;
const RECORD_SAMPLE: u32 = 9;
const RECORD_MMAP2: u32 = 10;
/// `PERF_RECORD_MISC_*`.
const MISC_KERNEL: u16 = 1;
const MISC_USER: u16 = 2;
const MISC_BUILD_ID_SIZE: u16 = 1 << 15;
/// Feature bits (`HEADER_*`).
const FEATURE_BUILD_ID: usize = 2;
const FEATURE_HOSTNAME: usize = 3;
const FEATURE_OSRELEASE: usize = 4;
const FEATURE_VERSION: usize = 5;
const FEATURE_ARCH: usize = 6;
const FEATURE_NRCPUS: usize = 7;
const FEATURE_CMDLINE: usize = 11;
const FEATURE_SAMPLE_TIME: usize = 21;

/// Little-endian encoding into a buffer.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A `perf_header_string`: its padded length, then `s` as [`Out::padded`] writes it.
    fn string(&mut self, s: &str) {
        self.u32((s.len() + 1).next_multiple_of(8) as u32);
        self.padded(s);
    }
    /// `s` NUL-terminated, padded with NULs to a multiple of 8 bytes.
    fn padded(&mut self, s: &str) {
        let n = (s.len() + 1).next_multiple_of(8);
        self.0.extend_from_slice(s.as_bytes());
        self.0.resize(self.0.len() + n - s.len(), 0);
    }
    /// A record: its header, then what `body` writes (whose length must be a multiple of 8).
    fn record(&mut self, kind: u32, misc: u16, body: impl FnOnce(&mut Out)) {
        let start = self.0.len();
        self.u32(kind);
        self.u16(misc);
        self.u16(0);
        body(self);
        let size = u16::try_from(self.0.len() - start).unwrap_or(u16::MAX);
        self.0[start + 6..start + 8].copy_from_slice(&size.to_le_bytes());
    }
}

/// Writes the samples (or off-CPU waits, whose period is the time waited) as a `perf.data`.
pub fn write(ctx: &ReportContext, sampled: Sampled<'_>, out: &mut dyn Write) -> Result<()> {
    let cpu = sampled.profile;
    let mut data = Out::default();
    // Who ran, and what was mapped where: before the first sample, at time 0.
    let mut tids: Vec<(u32, u32)> = cpu.stacks.iter().map(|s| (s.pid, s.tid)).collect();
    tids.sort_unstable();
    tids.dedup();
    for &(pid, tid) in &tids {
        data.record(RECORD_COMM, 0, |o| {
            o.u32(pid);
            o.u32(tid);
            o.padded(ctx.names.get(tid));
        });
    }
    let mut spaces: Vec<_> = cpu.stacks.iter().map(|s| s.space).collect();
    spaces.sort_unstable();
    spaces.dedup();
    let mut used = vec![false; ctx.mappings.modules.len()];
    for space in spaces {
        for m in ctx.mappings.of(space) {
            let Some(module) = ctx.mappings.module(m) else {
                continue;
            };
            used[m.module] = true;
            data.record(RECORD_MMAP2, MISC_USER, |o| {
                o.u32(space.0);
                o.u32(space.0);
                o.u64(m.start);
                o.u64(m.end - m.start);
                o.u64(m.pgoff);
                // Device, inode and generation: unknown; the build-id table names the file.
                o.u32(0);
                o.u32(0);
                o.u64(0);
                o.u64(0);
                o.u32(5); // PROT_READ | PROT_EXEC
                o.u32(2); // MAP_PRIVATE
                o.padded(&module.path);
            });
        }
    }
    for s in &cpu.timeline {
        let st = &cpu.stacks[s.stack as usize];
        let leaf_kernel = st.addresses.first().is_some_and(|a| a.kernel);
        let misc = if leaf_kernel { MISC_KERNEL } else { MISC_USER };
        data.record(RECORD_SAMPLE, misc, |o| {
            o.u64(st.addresses.first().map_or(0, |a| a.addr));
            o.u32(st.pid);
            o.u32(st.tid);
            o.u64(s.time);
            o.u32(s.cpu);
            o.u32(0);
            o.u64(s.period);
            let kernel = st.addresses.iter().filter(|a| a.kernel).count();
            let user = st.addresses.len() - kernel;
            let marks = usize::from(kernel > 0) + usize::from(user > 0);
            o.u64((st.addresses.len() + marks) as u64);
            if kernel > 0 {
                o.u64(CONTEXT_KERNEL);
                st.addresses
                    .iter()
                    .filter(|a| a.kernel)
                    .for_each(|a| o.u64(a.addr));
            }
            if user > 0 {
                o.u64(CONTEXT_USER);
                st.addresses
                    .iter()
                    .filter(|a| !a.kernel)
                    .for_each(|a| o.u64(a.addr));
            }
        });
    }

    // The feature sections: build-ids of the modules mapped, and the architecture.
    let mut build_ids = Out::default();
    for (m, _) in ctx.mappings.modules.iter().zip(&used).filter(|(_, &u)| u) {
        if m.build_id.is_empty() {
            continue;
        }
        build_ids.record(0, MISC_USER | MISC_BUILD_ID_SIZE, |o| {
            o.u32(u32::MAX); // pid -1: the host machine
            let mut id = [0u8; 20];
            let n = m.build_id.len().min(20);
            id[..n].copy_from_slice(&m.build_id[..n]);
            o.0.extend_from_slice(&id);
            o.0.extend_from_slice(&[n as u8, 0, 0, 0]);
            o.padded(&m.path);
        });
    }
    let h = &ctx.header;
    let string = |s: &str| {
        let mut o = Out::default();
        o.string(s);
        o
    };
    // perf's files give the recorder's command line, its own name first (viewers such as
    // hotspot replace that word with "perf"): `rec` then the recorded command.
    let mut cmdline = Out::default();
    cmdline.u32(h.command.len() as u32 + 1);
    cmdline.string("rec");
    h.command.iter().for_each(|w| cmdline.string(w));
    // Readers take these sections for granted: hotspot 1.3's perfparser leaves its CPU count
    // unset without NRCPUS, and hotspot then crashes at random on opening the file.
    let cpus = cpu
        .timeline
        .iter()
        .map(|s| s.cpu)
        .max()
        .map_or(1, |c| c + 1);
    let mut nrcpus = Out::default();
    nrcpus.u32(cpus); // available
    nrcpus.u32(cpus); // online (those that sampled; the recording does not say more)
    let mut times = Out::default();
    let (first, last) = cpu.time_range.unwrap_or((0, 0));
    times.u64(first);
    times.u64(last);

    let attr = attr(ctx, sampled);
    let ids = [1u64];
    let attrs_at = HEADER_SIZE;
    let ids_at = attrs_at + (ATTR_SIZE + 16) as u64;
    let data_at = ids_at + 8 * ids.len() as u64;
    let features_at = data_at + data.0.len() as u64;
    let sections = [
        (FEATURE_BUILD_ID, build_ids),
        (FEATURE_HOSTNAME, string(&h.hostname)),
        (FEATURE_OSRELEASE, string(&h.kernel_release)),
        (
            FEATURE_VERSION,
            string(concat!("crossprof hostside ", env!("CARGO_PKG_VERSION"))),
        ),
        (FEATURE_ARCH, string(perf_arch(&h.arch))),
        (FEATURE_NRCPUS, nrcpus),
        (FEATURE_CMDLINE, cmdline),
        (FEATURE_SAMPLE_TIME, times),
    ];
    let mut file = Out::default();
    file.0.extend_from_slice(b"PERFILE2");
    file.u64(HEADER_SIZE);
    file.u64((ATTR_SIZE + 16) as u64);
    file.u64(attrs_at);
    file.u64((ATTR_SIZE + 16) as u64);
    file.u64(data_at);
    file.u64(data.0.len() as u64);
    file.u64(0); // event types
    file.u64(0);
    let mut features = [0u64; 4];
    for (bit, _) in &sections {
        features[bit / 64] |= 1 << (bit % 64);
    }
    features.iter().for_each(|&w| file.u64(w));
    file.0.extend_from_slice(&attr);
    file.u64(ids_at);
    file.u64(8 * ids.len() as u64);
    ids.iter().for_each(|&id| file.u64(id));
    file.0.extend_from_slice(&data.0);
    let mut at = features_at + 16 * sections.len() as u64;
    for (_, s) in &sections {
        file.u64(at);
        file.u64(s.0.len() as u64);
        at += s.0.len() as u64;
    }
    for (_, s) in &sections {
        file.0.extend_from_slice(&s.0);
    }
    out.write_all(&file.0)?;
    Ok(())
}

/// The event's `perf_event_attr`: the software `cpu-clock` event at the recording's frequency
/// for CPU time, else a raw event (perf names it by the file's config alone).
fn attr(ctx: &ReportContext, sampled: Sampled<'_>) -> Vec<u8> {
    let mut a = Out::default();
    let clock = sampled.time_event(ctx) && !sampled.off_cpu;
    a.u32(if clock { 1 } else { 4 }); // PERF_TYPE_SOFTWARE or PERF_TYPE_RAW
    a.u32(ATTR_SIZE as u32);
    a.u64(0); // PERF_COUNT_SW_CPU_CLOCK
    let freq = u64::from(ctx.header.sample_freq);
    a.u64(freq);
    a.u64(SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CALLCHAIN | SAMPLE_CPU | SAMPLE_PERIOD);
    a.u64(0); // read_format
              // Flags: disabled, inherit, freq when a frequency is known, exclude_callchain_* clear.
    let mut flags = 1 | 1 << 1;
    if freq > 0 {
        flags |= 1 << 10;
    }
    a.u64(flags);
    a.0.resize(ATTR_SIZE, 0);
    a.0
}

/// `uname -m` as perf stores it for a header architecture name.
fn perf_arch(arch: &str) -> &str {
    match arch {
        "arm" => "armv7l",
        "x86" => "i686",
        other => other,
    }
}
