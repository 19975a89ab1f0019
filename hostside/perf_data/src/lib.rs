//! `perf.data` files as recordings: what `perf record` wrote on a board (`-g`, `--call-graph
//! fp` or `--call-graph dwarf`, any `-e` events) is turned into a crossprof recording in
//! memory, which every command then reads as it reads one of `rec`'s. Its modules are found by
//! the build-ids perf stored, its stack copies unwound by crossprof's unwinders with the
//! sysroot's tables.
//!
//! The file is parsed by the `linux-perf-data` crate, which puts the records back in time
//! order as perf's own reader does. Each record becomes the crossprof record that says the
//! same: samples (the main event's as CPU samples, the others' as event samples), their
//! kernel and user call chains, user registers and the stack bytes the kernel reported in
//! use; `COMM`, `FORK`, `EXIT`, `MMAP`/`MMAP2` (build-ids from the mapping or from perf's
//! build-id table), `LOST` and context switches. A record that does not parse ends the
//! conversion there, with a warning: the report covers what came before, and says the
//! recording is incomplete.
//!
//! Written by hand around the parser: the mapping of perf's records onto crossprof's, and a
//! check of the file's framing before the parser allocates anything for it.

#![deny(missing_docs)]

mod framing;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{bail, Context, Result};
use crossprof_format::{
    callchain, Arch, Comm, End, EventSample, FrameWriter, Header, Lost, Mmap, Record, Sample,
    Switch, Task, FORMAT_VERSION,
};
use linux_perf_data::linux_perf_event_reader::{
    constants::PERF_RECORD_MISC_MMAP_BUILD_ID, ContextSwitchRecord, EventRecord, Mmap2FileId,
    RawData, RawEventRecord, RecordType, SampleFormat, SamplingPolicy, TaskWasPreempted,
};
use linux_perf_data::{AttributeDescription, Endianness, PerfFileReader, PerfFileRecord};

/// The first bytes of a `perf.data` file, in the writer's byte order or the other.
const MAGICS: [&[u8; 8]; 2] = [b"PERFILE2", b"2ELIFREP"];

/// zstd level of the recording made in memory: it is read once, at once, so the fastest
/// level (zstd spends most of a conversion at `rec`'s level 7).
const CONVERSION_LEVEL: i32 = 1;

/// `PROT_READ | PROT_EXEC`, for `MMAP` records, which say only whether a mapping is code.
const PROT_CODE: u32 = 5;
const PROT_READ: u32 = 1;

/// Whether the file at `path` is a `perf.data` file (by its magic number).
pub fn is_perf_data(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| MAGICS.contains(&&magic))
}

/// A `perf.data` file as a crossprof recording.
#[derive(Debug)]
pub struct Converted {
    /// The recording's bytes.
    pub recording: Vec<u8>,
    /// Why the conversion stopped before the end of the file, when it did (the recording
    /// then holds what came before, without its end record).
    pub warning: Option<String>,
}

/// The crossprof recording that says what the `perf.data` file at `path` says.
pub fn convert(path: &Path) -> Result<Converted> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len();
    from_reader(path, BufReader::new(file), len)
}

/// [`convert`] of the `len` bytes `data` reads (`path` names them in messages). The file's
/// framing is checked first (`framing`): sections that run past its end or counts their
/// bytes cannot hold are an error, before the parser allocates anything for them.
pub fn from_reader<R: Read + Seek>(path: &Path, mut data: R, len: u64) -> Result<Converted> {
    framing::check(&mut data, len)
        .with_context(|| format!("{}: damaged perf.data", path.display()))?;
    data.seek(SeekFrom::Start(0))?;
    // The parser is a library's: should it panic on a file it does not expect, that is an
    // error about the file, not the end of hostside.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| convert_parsed(path, data))) {
        Ok(converted) => converted,
        Err(_) => bail!(
            "{}: the perf.data parser failed on this file",
            path.display()
        ),
    }
}

fn convert_parsed<R: Read + Seek>(path: &Path, data: R) -> Result<Converted> {
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(data)
        .with_context(|| format!("{}: not a readable perf.data file", path.display()))?;
    let attrs = perf_file.event_attributes().to_vec();
    let Some(main) = attrs.first() else {
        bail!("{}: perf.data without events", path.display());
    };
    let arch_name = perf_file
        .arch()
        .ok()
        .flatten()
        .unwrap_or_default()
        .to_string();
    let Some(arch) = arch_of(&arch_name) else {
        bail!(
            "{}: perf.data from a {arch_name:?} machine, which crossprof does not unwind",
            path.display()
        );
    };
    let build_ids: HashMap<Vec<u8>, Vec<u8>> = perf_file
        .build_ids()
        .unwrap_or_default()
        .into_values()
        .map(|d| (d.path, d.build_id))
        .collect();
    let start = perf_file
        .sample_time_range()
        .ok()
        .flatten()
        .map_or(0, |r| r.first_sample_time);
    let header = Header {
        format_version: FORMAT_VERSION,
        arch: arch.name().into(),
        big_endian: perf_file.endian() == Endianness::BigEndian,
        pointer_size: arch.pointer_size(),
        page_size: 4096,
        kernel_release: text(perf_file.os_release()),
        hostname: text(perf_file.hostname()),
        command: perf_file
            .cmdline()
            .ok()
            .flatten()
            .map(|c| c.into_iter().map(String::from).collect())
            .unwrap_or_default(),
        clock: "monotonic".into(),
        start_clock_ns: start,
        sample_freq: match main.attr.sampling_policy {
            SamplingPolicy::Frequency(f) => u32::try_from(f).unwrap_or(u32::MAX),
            _ => 0,
        },
        call_graph: call_graph(main),
        rec_version: format!("perf {}", text(perf_file.perf_version())),
        event: name(main, 0),
        events: if attrs.len() > 1 {
            attrs.iter().enumerate().map(|(i, a)| name(a, i)).collect()
        } else {
            Vec::new()
        },
        ..Header::default()
    };
    let mut w = FrameWriter::new(Vec::new(), &header)?;
    w.set_level(CONVERSION_LEVEL);
    let mut c = Converter {
        w,
        attrs,
        build_ids,
        time: start,
        samples: 0,
        lost: 0,
    };
    loop {
        match record_iter.next_record(&mut perf_file) {
            Ok(Some(PerfFileRecord::EventRecord { attr_index, record })) => {
                if let Err(e) = c.record(attr_index, &record) {
                    let why = format!("a {:?} record does not parse ({e})", record.record_type);
                    return c.stop(why);
                }
            }
            // perf's own records (build-ids, round ends, ...) say nothing a report needs.
            Ok(Some(PerfFileRecord::UserRecord(_))) => {}
            Ok(None) => break,
            Err(e) => return c.stop(format!("reading stopped ({e})")),
        }
    }
    let end = End {
        time: c.time,
        exit_status: 0,
        samples: c.samples,
        lost_samples: c.lost,
    };
    Ok(Converted {
        recording: c.w.finish(end)?,
        warning: None,
    })
}

/// The conversion's state.
struct Converter {
    w: FrameWriter<Vec<u8>>,
    attrs: Vec<AttributeDescription>,
    build_ids: HashMap<Vec<u8>, Vec<u8>>,
    /// The latest time seen: records without one take it.
    time: u64,
    samples: u64,
    lost: u64,
}

impl Converter {
    /// A mapping of `len` bytes at `start` of the file at `path`, with the build-id perf's
    /// table gives that path (an `MMAP2` record may carry its own).
    fn mapping(&self, time: u64, pid: i32, tid: i32, start: u64, len: u64, path: &RawData) -> Mmap {
        let path = path.as_slice();
        Mmap {
            time,
            pid: pid as u32,
            tid: tid as u32,
            start,
            len,
            build_id: self
                .build_ids
                .get(path.as_ref())
                .cloned()
                .unwrap_or_default(),
            path: String::from_utf8_lossy(&path).into_owned(),
            ..Mmap::default()
        }
    }

    /// The recording so far, without its end: reading stopped for `why`.
    fn stop(self, why: String) -> Result<Converted> {
        Ok(Converted {
            recording: self.w.close()?,
            warning: Some(format!("{why}; what came before it is reported")),
        })
    }

    fn record(&mut self, attr_index: usize, raw: &RawEventRecord<'_>) -> std::io::Result<()> {
        let common = raw.common_data().unwrap_or_default();
        if let Some(t) = common.timestamp {
            self.time = self.time.max(t);
        }
        let time = common.timestamp.unwrap_or(self.time);
        let id = |v: Option<i32>| v.map_or(0, |v| v as u32);
        check_record(raw)?;
        let record = match raw.parse()? {
            EventRecord::Sample(s) => {
                self.samples += 1;
                let mut sample = Sample {
                    time: s.timestamp.unwrap_or(time),
                    pid: id(s.pid),
                    tid: id(s.tid),
                    cpu: s.cpu.unwrap_or(0),
                    period: s.period.unwrap_or(1),
                    addr: s.addr.unwrap_or(0),
                    ..Sample::default()
                };
                if let Some(chain) = &s.callchain {
                    let ips = (0..chain.len()).filter_map(|i| chain.get(i));
                    callchain::split(ips, &mut sample.kernel_chain, &mut sample.user_chain);
                }
                let mask = self
                    .attrs
                    .get(attr_index)
                    .map_or(0, |a| a.attr.sample_regs_user);
                // Registers go with a stack copy only: `perf record -g` on AArch64 samples
                // the link register alone (for perf's own leaf fix-up), and a sample with
                // registers would be unwound from them instead of taking its chain.
                if let (Some(regs), Some(_)) = (&s.user_regs, &s.user_stack) {
                    sample.regs_mask = mask;
                    sample.regs = (0..64)
                        .filter(|bit| mask & (1 << bit) != 0)
                        .map(|bit| regs.get(bit).unwrap_or(0))
                        .collect();
                }
                if let Some((stack, in_use)) = &s.user_stack {
                    let n = usize::try_from(*in_use)
                        .unwrap_or(usize::MAX)
                        .min(stack.len());
                    sample.stack = stack.as_slice()[..n].to_vec();
                }
                match attr_index {
                    0 => Record::Sample(sample),
                    i => Record::EventSample(EventSample {
                        event: u32::try_from(i).unwrap_or(u32::MAX),
                        sample,
                    }),
                }
            }
            EventRecord::Comm(r) => Record::Comm(Comm {
                time,
                pid: r.pid as u32,
                tid: r.tid as u32,
                comm: String::from_utf8_lossy(&r.name.as_slice()).into_owned(),
                exec: r.is_execve,
            }),
            EventRecord::Fork(r) => Record::Fork(task(&r, time)),
            EventRecord::Exit(r) => Record::Exit(task(&r, time)),
            EventRecord::Mmap(r) => {
                let mut m = self.mapping(time, r.pid, r.tid, r.address, r.length, &r.path);
                m.pgoff = r.page_offset;
                m.prot = if r.is_executable {
                    PROT_CODE
                } else {
                    PROT_READ
                };
                Record::Mmap(m)
            }
            EventRecord::Mmap2(r) => {
                let mut m = self.mapping(time, r.pid, r.tid, r.address, r.length, &r.path);
                m.pgoff = r.page_offset;
                m.prot = r.protection;
                match &r.file_id {
                    Mmap2FileId::BuildId(b) => m.build_id = b.clone(),
                    Mmap2FileId::InodeAndVersion(i) => m.inode = i.inode,
                }
                Record::Mmap(m)
            }
            EventRecord::Lost(r) => {
                self.lost += r.count;
                Record::Lost(Lost {
                    time,
                    count: r.count,
                    kind: "samples".into(),
                })
            }
            EventRecord::ContextSwitch(r) => Record::Switch(Switch {
                time,
                pid: id(common.pid),
                tid: id(common.tid),
                cpu: common.cpu.unwrap_or(0),
                out: matches!(r, ContextSwitchRecord::Out { .. }),
                preempt: matches!(
                    r,
                    ContextSwitchRecord::Out {
                        preempted: TaskWasPreempted::Yes,
                        ..
                    }
                ),
            }),
            _ => return Ok(()),
        };
        self.w.push(&record)
    }
}

/// What the record parser asserts rather than checks: a mapping's build-id holds at most 20
/// bytes (pid, tid, start, length and offset come before its size).
fn check_record(raw: &RawEventRecord<'_>) -> std::io::Result<()> {
    if raw.record_type == RecordType::MMAP2 && raw.misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 {
        let size = raw.data.get(32..33).map(|b| b.as_slice()[0]);
        if size.is_none_or(|n| n > 20) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a mapping's build-id of {size:?} bytes"),
            ));
        }
    }
    Ok(())
}

fn task(r: &linux_perf_data::linux_perf_event_reader::ForkOrExitRecord, time: u64) -> Task {
    Task {
        time: if r.timestamp != 0 { r.timestamp } else { time },
        pid: r.pid as u32,
        tid: r.tid as u32,
        ppid: r.ppid as u32,
        ptid: r.ptid as u32,
    }
}

/// crossprof's architecture for `uname -m` of the machine perf ran on.
fn arch_of(machine: &str) -> Option<Arch> {
    Some(match machine {
        "x86_64" | "amd64" => Arch::X86_64,
        "i386" | "i486" | "i586" | "i686" | "x86" => Arch::X86,
        "aarch64" | "arm64" => Arch::Aarch64,
        m if m.starts_with("arm") => Arch::Arm,
        "riscv64" => Arch::Riscv64,
        _ => return None,
    })
}

/// The event's name as perf stored it, else a made-up one.
fn name(a: &AttributeDescription, index: usize) -> String {
    a.name.clone().unwrap_or_else(|| format!("event{index}"))
}

/// The header's call-graph mode for an event recorded with `attr`.
fn call_graph(a: &AttributeDescription) -> String {
    let format = a.attr.sample_format;
    if format.contains(SampleFormat::STACK_USER) {
        format!("dwarf={}", a.attr.sample_stack_user)
    } else if format.contains(SampleFormat::CALLCHAIN) {
        "fp".into()
    } else {
        String::new()
    }
}

fn text<E>(s: Result<Option<&str>, E>) -> String {
    s.ok().flatten().unwrap_or_default().to_string()
}
