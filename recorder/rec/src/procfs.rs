//! What `rec` reads from /proc and /sys: memory maps, threads, CPUs and the vDSO (kernel
//! symbols: [`crate::kernel_symbols`]). Everything here runs outside any signal handler and may allocate.

use std::fs;
use std::io;

/// One line of /proc/PID/maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapLine {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// PROT_* bits from the `rwx` columns.
    pub prot: u32,
    /// File offset.
    pub pgoff: u64,
    /// Inode number (0 for anonymous memory).
    pub inode: u64,
    /// Path or pseudo-name (`[vdso]`, `[stack]`), empty for anonymous memory.
    pub path: String,
}

impl MapLine {
    /// The MMAP record for this mapping of process `pid`, seen at `time` (identity fields are
    /// filled in later from the file itself).
    pub fn into_mmap(self, pid: u32, time: u64) -> crossprof_format::Mmap {
        crossprof_format::Mmap {
            time,
            pid,
            tid: pid,
            start: self.start,
            len: self.end - self.start,
            pgoff: self.pgoff,
            path: self.path,
            prot: self.prot,
            inode: self.inode,
            ..Default::default()
        }
    }
}

/// Parses /proc/PID/maps text; malformed lines are skipped.
pub fn parse_maps(text: &str) -> Vec<MapLine> {
    text.lines().filter_map(parse_map_line).collect()
}

fn parse_map_line(line: &str) -> Option<MapLine> {
    let mut it = line.splitn(6, ' ');
    let (range, perms, off, _dev, inode) =
        (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    let path = it.next().unwrap_or("").trim_start().to_string();
    let (s, e) = range.split_once('-')?;
    let p = perms.as_bytes();
    let mut prot = 0;
    if p.first() == Some(&b'r') {
        prot |= libc::PROT_READ as u32;
    }
    if p.get(1) == Some(&b'w') {
        prot |= libc::PROT_WRITE as u32;
    }
    if p.get(2) == Some(&b'x') {
        prot |= libc::PROT_EXEC as u32;
    }
    Some(MapLine {
        start: u64::from_str_radix(s, 16).ok()?,
        end: u64::from_str_radix(e, 16).ok()?,
        prot,
        pgoff: u64::from_str_radix(off, 16).ok()?,
        inode: inode.parse().ok()?,
        path,
    })
}

/// Whether process `pid` has ended: it is gone, or a zombie its parent has not reaped yet
/// (its events report nothing more, and waiting for it to disappear would wait on the
/// parent). Read from /proc/PID/stat, whose state letter follows the command name.
pub fn has_exited(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    matches!(state, Some('Z' | 'X'))
}

/// The memory maps of a process.
pub fn maps(pid: u32) -> io::Result<Vec<MapLine>> {
    Ok(parse_maps(&fs::read_to_string(format!(
        "/proc/{pid}/maps"
    ))?))
}

/// Resident pages of a process (second field of /proc/PID/statm).
pub fn statm_resident(pid: u32) -> Option<u64> {
    parse_statm(&fs::read_to_string(format!("/proc/{pid}/statm")).ok()?)
}

/// Parses the resident-pages field of a statm line.
pub fn parse_statm(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Thread ids of a process.
pub fn threads(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The name of a thread.
pub fn comm(pid: u32, tid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// Online CPU numbers, from /sys (a list like `0-3,5`), else 0..configured.
pub fn online_cpus() -> Vec<u32> {
    if let Ok(s) = fs::read_to_string("/sys/devices/system/cpu/online") {
        let cpus = parse_cpu_list(s.trim());
        if !cpus.is_empty() {
            return cpus;
        }
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32;
    (0..n).collect()
}

/// Parses a kernel CPU list (`0-3,5`).
pub fn parse_cpu_list(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    out.extend(a..=b.min(a.saturating_add(4096)));
                }
            }
            None => out.extend(part.parse::<u32>().ok()),
        }
    }
    out
}

/// `kernel.perf_event_paranoid`, if readable.
pub fn perf_event_paranoid() -> Option<i32> {
    fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A copy of this process's vDSO and where it is mapped. The application's vDSO is the same
/// image (same kernel, same ABI), so the host can symbolize its frames from this copy.
pub fn own_vdso() -> Option<(u64, Vec<u8>)> {
    let own = maps(std::process::id()).ok()?;
    let m = own.iter().find(|m| m.path == "[vdso]")?;
    let len = (m.end - m.start) as usize;
    if len == 0 || len > 1 << 20 {
        return None;
    }
    let mut data = vec![0u8; len];
    // SAFETY: the range is our own readable vDSO mapping, as /proc/self/maps says.
    unsafe { std::ptr::copy_nonoverlapping(m.start as *const u8, data.as_mut_ptr(), len) };
    Some((m.start, data))
}

/// `uname` release and node name.
pub fn uname() -> (String, String) {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new());
    }
    let s = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    (s(&u.release), s(&u.nodename))
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse() {
        let m = parse_maps(
            "55d0c0000000-55d0c0001000 r-xp 00001000 fd:01 1234   /usr/bin/app\n\
             7ffd1000-7ffd3000 r-xp 00000000 00:00 0                  [vdso]\n\
             7ffd5000-7ffd6000 rw-p 00000000 00:00 0 \n\
             garbage\n",
        );
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].path, "/usr/bin/app");
        assert_eq!(m[0].prot, 5);
        assert_eq!(m[0].pgoff, 0x1000);
        assert_eq!(m[0].inode, 1234);
        assert_eq!(m[1].path, "[vdso]");
        assert_eq!(m[2].path, "");
    }

    #[test]
    fn statm_parses() {
        assert_eq!(parse_statm("1000 250 30 5 0 100 0\n"), Some(250));
        assert_eq!(parse_statm("garbage"), None);
        assert!(statm_resident(std::process::id()).is_some_and(|p| p > 0));
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-3,5"), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("0"), vec![0]);
        assert_eq!(parse_cpu_list(""), Vec::<u32>::new());
    }
}
