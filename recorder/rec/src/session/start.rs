//! The start of a recording: the output file, the target (launched, attached to, or every
//! process with `-a`), its perf events, the heap transport, and the first records a reader
//! needs (header, vDSO, the /proc state of what already runs). The target runs on return.

use std::path::PathBuf;

use crossprof_format::FrameWriter;

use super::header::header;
use super::output::Output;
use super::Live;
use crate::cli::{Options, Target};
use crate::disk::{Disk, DiskThread};
use crate::drain::Drain;
use crate::error::RecError;
use crate::heap::{self, Heap, MapsSource};
use crate::launch;
use crate::perf::events::{self, Events};
use crate::segments;
use crate::signals;

/// Opens the output, launches or finds the target, opens its perf events and writes the
/// header, the vDSO and (when attaching) the /proc snapshot. The target runs on return.
pub(super) fn start(opts: &Options) -> Result<Live, RecError> {
    let file = segments::create_first(&opts.out)
        .map_err(|e| RecError::Output(opts.out.display().to_string(), e))?;
    let request = opts.request();
    let mut heap = match (&opts.target, opts.heap) {
        (Target::Launch(cmd), true) => Some(heap::prepare(cmd)?),
        (Target::Attach(pid), true) => Some(heap::attach::prepare(*pid)?),
        _ => None,
    };
    let (events, mut child) = open_target(opts, &request, heap.as_mut())?;
    let kernel = events.settings.kernel;
    let header = header(opts, kernel, &events);
    let disk = match opts.max_size {
        // Segments measure the compressed bytes as frames are written: those stay inline.
        Some(_) => Ok(Disk::Inline(file)),
        None => file
            .try_clone()
            .and_then(|syncer| DiskThread::new(file, syncer))
            .map(Disk::Thread),
    };
    let writer = disk
        .and_then(|disk| FrameWriter::new(disk, &header))
        .map_err(|e| RecError::Output(opts.out.display().to_string(), e))?;
    let data_maps = request.data_maps();
    let mut out = Output::new(writer, opts, &header, &events, data_maps);
    out.write_vdso();
    let mut injected = None;
    match (&opts.target, child.as_mut()) {
        (Target::Attach(pid), _) => {
            out.snapshot(*pid);
            signals::install(None);
            enable(&events, &mut out);
            if let Some((h, lib)) = heap.as_ref() {
                injected = Some(heap::attach::inject(
                    *pid,
                    lib,
                    h.socket_name(),
                    opts.heap_sample,
                )?);
            }
        }
        (Target::Launch(_), Some(c)) => {
            signals::install(Some(c.pid));
            if let Err(e) = c.start() {
                launch::reap(c.pid);
                return Err(e);
            }
        }
        (Target::System, _) => {
            signals::install(None);
            out.snapshot_all();
        }
        (Target::Launch(_), None) => unreachable!("a launch always has a child"),
    }
    out.flush();
    Ok(Live {
        out,
        events,
        child,
        heap: heap.map(|(h, _)| h),
        injected,
        drain: Drain::default(),
    })
}

/// Launches the command (held until [`launch::Launched::start`]) or checks the process to
/// attach to, and opens the perf events for it; `heap` is the heap transport of a launch with
/// `--heap`, switched to reading maps from /proc when there are no perf events to use.
fn open_target(
    opts: &Options,
    request: &events::Request,
    heap: Option<&mut (Heap, PathBuf)>,
) -> Result<(Events, Option<launch::Launched>), RecError> {
    Ok(match &opts.target {
        Target::Launch(cmd) => {
            let env = match &heap {
                Some((h, lib)) => {
                    heap::preload::environment(lib, h.socket_name(), opts.heap_sample)
                }
                None => Vec::new(),
            };
            let child = launch::spawn(cmd, &env)?;
            match events::for_launch(child.pid, request) {
                Ok(ev) => (ev, Some(child)),
                // Heap only, and no perf events here (qemu-user, kernels without
                // CONFIG_PERF_EVENTS, paranoid settings): maps come from /proc instead.
                Err(RecError::NoPerf(_)) | Err(RecError::Paranoid(_))
                    if heap.is_some() && !opts.cpu =>
                {
                    if let Some((h, _)) = heap {
                        h.set_source(MapsSource::Procfs);
                    }
                    (Events::none(), Some(child))
                }
                Err(e) => {
                    // Dropping the start pipe makes the child exit without running.
                    child.start_never();
                    return Err(e);
                }
            }
        }
        Target::Attach(pid) => {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(RecError::NoSuchProcess(*pid));
            }
            (events::for_attach(*pid, request)?, None)
        }
        Target::System => (events::for_system(request)?, None),
    })
}

/// Enables the events of an attach (a launch's are enabled at its exec); a thread or CPU whose
/// event fails is not sampled, said on stderr and counted in an `enable-failed` `Lost` record.
fn enable(events: &Events, out: &mut Output) {
    let failed = events
        .fds
        .iter()
        .filter(|fd| crate::perf::attr::ioctl(fd, crate::perf::attr::IOC_ENABLE, 0).is_err())
        .count() as u64;
    if failed > 0 {
        eprintln!(
            "rec: {failed} of {} perf events could not be enabled; those threads or CPUs \
             are not sampled",
            events.fds.len()
        );
    }
    out.lost("enable-failed", failed);
}
