//! Fetching executables and debug info by build-id from debuginfod servers, the way elfutils'
//! client does: the servers in `DEBUGINFOD_URLS` (space separated) are asked in turn for
//! `/buildid/HEX/executable` or `/buildid/HEX/debuginfo`; downloads are kept in
//! `DEBUGINFOD_CACHE_PATH` (default `$XDG_CACHE_HOME/debuginfod_client`) in elfutils' layout
//! (`HEX/debuginfo`), so this cache and gdb's or perf's are one; `DEBUGINFOD_TIMEOUT` (default
//! 90 s) bounds connecting, each read, and the first 100 KiB of a download, as elfutils does.
//!
//! This exists because distributions serve every package's debug info this way, and a
//! developer without a sysroot still has the board's build-ids. Opt-in: nothing is fetched
//! unless `DEBUGINFOD_URLS` is set. What arrives is untrusted: it is written to a temporary
//! file, bounded in size, and kept only when it is an ELF file with the requested build-id, so
//! a misconfigured or hostile server yields an error, never a wrong name.

use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::index::read_facts;
use crate::lookup::hex;

/// elfutils' default `DEBUGINFOD_TIMEOUT`, seconds.
const DEFAULT_TIMEOUT_S: u64 = 90;
/// A server must deliver this much (or the whole file) within the timeout (elfutils' rule).
const COMMENCE_BYTES: u64 = 100 * 1024;
/// The largest download accepted when `DEBUGINFOD_MAXSIZE` is not set.
const DEFAULT_MAX_SIZE: u64 = 4 << 30;

/// What to fetch for a build-id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Artifact {
    /// The binary or library itself (its program headers map the recorded file offsets).
    Executable,
    /// The separate debug file (DWARF, symbols).
    DebugInfo,
}

impl Artifact {
    /// The name in URLs and in the cache: `executable` or `debuginfo`.
    pub fn as_str(self) -> &'static str {
        match self {
            Artifact::Executable => "executable",
            Artifact::DebugInfo => "debuginfo",
        }
    }
}

/// A debuginfod client configured from elfutils' environment variables. Cheap to share
/// between threads (`Sync`); each fetch blocks its thread.
#[derive(Debug)]
pub struct Debuginfod {
    urls: Vec<String>,
    cache: PathBuf,
    timeout: Option<Duration>,
    max_size: u64,
    progress: bool,
    agent: ureq::Agent,
    /// Servers that did not answer (refused, timed out, broke off) earlier in this run: not
    /// asked again, so an unreachable server costs one timeout per run, not one per module.
    dead: Mutex<HashSet<String>>,
}

/// Why a fetch found nothing: what each server said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError {
    /// The requested build-id, hex.
    pub build_id: String,
    /// What was asked for.
    pub artifact: Artifact,
    /// Each server with its failure, in the order asked.
    pub failures: Vec<(String, String)>,
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {}:", self.artifact.as_str(), self.build_id)?;
        for (i, (url, why)) in self.failures.iter().enumerate() {
            let sep = if i == 0 { " " } else { "; " };
            write!(f, "{sep}{url}: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FetchError {}

impl Debuginfod {
    /// The client `DEBUGINFOD_URLS`, `DEBUGINFOD_CACHE_PATH`, `DEBUGINFOD_TIMEOUT` and
    /// `DEBUGINFOD_MAXSIZE` describe; `None` when no server is configured.
    pub fn from_env() -> Option<Debuginfod> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let urls: Vec<String> = var("DEBUGINFOD_URLS")?
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        let cache = var("DEBUGINFOD_CACHE_PATH")
            .map(PathBuf::from)
            .or_else(|| dirs::cache_dir().map(|d| d.join("debuginfod_client")))?;
        // elfutils: zero or negative means no timeout.
        let timeout = match var("DEBUGINFOD_TIMEOUT").map(|t| t.trim().parse::<i64>()) {
            Some(Ok(t)) if t <= 0 => None,
            Some(Ok(t)) => Some(Duration::from_secs(t as u64)),
            _ => Some(Duration::from_secs(DEFAULT_TIMEOUT_S)),
        };
        let max_size = match var("DEBUGINFOD_MAXSIZE").map(|s| s.trim().parse::<u64>()) {
            Some(Ok(n)) if n > 0 => n,
            _ => DEFAULT_MAX_SIZE,
        };
        Some(Debuginfod::new(urls, cache, timeout, max_size))
    }

    /// A client for `urls` caching in `cache`. `timeout` bounds connecting, each read and the
    /// first 100 KiB; `max_size` the bytes of one download.
    pub fn new(
        urls: Vec<String>,
        cache: PathBuf,
        timeout: Option<Duration>,
        max_size: u64,
    ) -> Debuginfod {
        let mut agent = ureq::AgentBuilder::new()
            .user_agent(concat!("crossprof-hostside/", env!("CARGO_PKG_VERSION")));
        if let Some(t) = timeout {
            agent = agent.timeout_connect(t).timeout_read(t);
        }
        Debuginfod {
            urls,
            cache,
            timeout,
            max_size,
            progress: std::io::stderr().is_terminal(),
            agent: agent.build(),
            dead: Mutex::new(HashSet::new()),
        }
    }

    /// The servers asked, in order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The file with build-id `build_id` from the cache, else from the first server that has
    /// it. Blocks for at most about the timeout per server when servers do not answer.
    pub fn fetch(&self, build_id: &[u8], artifact: Artifact) -> Result<PathBuf, FetchError> {
        let id = hex(build_id);
        let mut err = FetchError {
            build_id: id.clone(),
            artifact,
            failures: Vec::new(),
        };
        if build_id.is_empty() {
            err.failures
                .push(("-".into(), "no build-id recorded".into()));
            return Err(err);
        }
        let dir = self.cache.join(&id);
        let dest = dir.join(artifact.as_str());
        if has_build_id(&dest, build_id) {
            return Ok(dest);
        }
        for url in &self.urls {
            if self.dead.lock().is_ok_and(|d| d.contains(url)) {
                let why = "skipped: it did not answer earlier in this run".to_string();
                err.failures.push((url.clone(), why));
                continue;
            }
            match self.download(url, &id, artifact, &dir, &dest, build_id) {
                Ok(()) => return Ok(dest),
                Err(Failure::Answer(why)) => err.failures.push((url.clone(), why)),
                Err(Failure::NoAnswer(why)) => {
                    if let Ok(mut d) = self.dead.lock() {
                        d.insert(url.clone());
                    }
                    err.failures.push((url.clone(), why));
                }
            }
        }
        Err(err)
    }

    fn download(
        &self,
        url: &str,
        id: &str,
        artifact: Artifact,
        dir: &Path,
        dest: &Path,
        build_id: &[u8],
    ) -> Result<(), Failure> {
        let full = format!("{url}/buildid/{id}/{}", artifact.as_str());
        let resp = match self.agent.get(&full).call() {
            Ok(r) => r,
            Err(ureq::Error::Status(404, _)) => return Err(Failure::Answer("not found".into())),
            Err(ureq::Error::Status(code, r)) => {
                return Err(Failure::Answer(format!("HTTP {code} {}", r.status_text())))
            }
            Err(e) => return Err(Failure::NoAnswer(e.to_string())),
        };
        let len = resp
            .header("content-length")
            .and_then(|l| l.parse::<u64>().ok());
        if len.is_some_and(|l| l > self.max_size) {
            let why = format!("file too large ({} bytes)", len.unwrap_or(0));
            return Err(Failure::Answer(why));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::Answer(format!("cache {}: {e}", dir.display())))?;
        let tmp = dir.join(format!(".{}.{}.tmp", artifact.as_str(), std::process::id()));
        let r = self
            .copy_body(resp.into_reader(), &tmp, len, id, artifact)
            .and_then(|()| {
                if has_build_id(&tmp, build_id) {
                    std::fs::rename(&tmp, dest).map_err(|e| Failure::Answer(format!("cache: {e}")))
                } else {
                    Err(Failure::Answer(
                        "the answer is not an ELF file with this build-id".into(),
                    ))
                }
            });
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }

    /// Streams the body into `tmp`, enforcing the size bound and elfutils' commencing rule.
    fn copy_body(
        &self,
        mut body: impl Read,
        tmp: &Path,
        len: Option<u64>,
        id: &str,
        artifact: Artifact,
    ) -> Result<(), Failure> {
        let mut out = File::create(tmp)
            .map_err(|e| Failure::Answer(format!("cache {}: {e}", tmp.display())))?;
        let bar = self.progress.then(|| {
            let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "debuginfod {msg} {bar:30} {bytes}/{total_bytes} ({eta})",
            ) {
                bar.set_style(style);
            }
            bar.set_message(format!("{} {}", artifact.as_str(), id));
            bar
        });
        let start = Instant::now();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        let result = loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) => break Err(Failure::NoAnswer(format!("after {total} bytes: {e}"))),
            };
            total += n as u64;
            if total > self.max_size {
                let why = format!("file too large (over {} bytes)", self.max_size);
                break Err(Failure::Answer(why));
            }
            if let Err(e) = out.write_all(&buf[..n]) {
                break Err(Failure::Answer(format!("cache {}: {e}", tmp.display())));
            }
            if let Some(bar) = &bar {
                bar.set_position(total);
            }
            if let Some(t) = self.timeout {
                if total < COMMENCE_BYTES && start.elapsed() > t {
                    break Err(Failure::NoAnswer(format!(
                        "only {total} bytes in {} s (DEBUGINFOD_TIMEOUT)",
                        t.as_secs()
                    )));
                }
            }
        };
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        result?;
        out.sync_all()
            .map_err(|e| Failure::Answer(format!("cache: {e}")))
    }
}

/// Why one server gave nothing: it answered something unusable, or it did not answer.
enum Failure {
    /// An answer that is no use for this build-id (404, garbage, too large).
    Answer(String),
    /// No answer: refused, timed out, broke off. The server is not asked again this run.
    NoAnswer(String),
}

/// True when `path` is an ELF file with build-id `id`.
fn has_build_id(path: &Path, id: &[u8]) -> bool {
    path.is_file() && read_facts(path).build_id.as_deref() == Some(id)
}
