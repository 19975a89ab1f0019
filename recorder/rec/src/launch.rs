//! Starting the command to record: fork, hold the child until its perf events are attached,
//! then let it exec. The events are armed with `enable_on_exec`, so counting starts exactly at
//! the exec and never covers `rec`'s own set-up.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::error::RecError;

/// A forked child waiting for [`Launched::start`].
pub struct Launched {
    /// Its process id.
    pub pid: u32,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
    program: String,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn is_executable(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated string.
    p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// Finds the program the way a shell would: as a path when it contains a slash, else in $PATH.
pub fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

/// Forks a child that will run `command` once started, with `extra_env` added to (or
/// replacing in) rec's environment.
pub fn spawn(
    command: &[OsString],
    extra_env: &[(OsString, OsString)],
) -> Result<Launched, RecError> {
    let name = command[0].to_string_lossy().into_owned();
    let path = resolve(&command[0]).ok_or_else(|| RecError::CommandNotFound(name.clone()))?;
    let to_c =
        |s: &OsStr| CString::new(s.as_bytes()).map_err(|_| RecError::CommandNotFound(name.clone()));
    let c_path = to_c(path.as_os_str())?;
    let c_args = command
        .iter()
        .map(|a| to_c(a))
        .collect::<Result<Vec<_>, _>>()?;
    let mut argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let c_env = environment(extra_env);
    let mut envp: Vec<*const libc::c_char> = c_env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());

    let io_err = |e: io::Error| RecError::Io("cannot create a pipe".into(), e);
    let (go_r, go_w) = pipe().map_err(io_err)?;
    let (err_r, err_w) = pipe().map_err(io_err)?;
    // SAFETY: rec is single-threaded here; the child only calls async-signal-safe functions
    // (read, execv, write, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(RecError::Io(
            "cannot fork".into(),
            io::Error::last_os_error(),
        ));
    }
    if pid == 0 {
        // SAFETY: see above; every pointer was built before the fork and stays valid.
        unsafe {
            let mut b = 0u8;
            libc::close(go_w.as_raw_fd());
            if libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1) != 1 {
                // rec died before starting us: do not run unrecorded.
                libc::_exit(127);
            }
            libc::execve(c_path.as_ptr(), argv.as_ptr(), envp.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(
                err_w.as_raw_fd(),
                &errno as *const i32 as *const libc::c_void,
                4,
            );
            libc::_exit(127);
        }
    }
    drop(go_r);
    drop(err_w);
    Ok(Launched {
        pid: pid as u32,
        go: Some(go_w),
        exec_error: err_r,
        program: name,
    })
}

/// rec's environment with `extra` set, as `NAME=value` C strings (built before the fork:
/// the child may not allocate).
fn environment(extra: &[(OsString, OsString)]) -> Vec<CString> {
    let mut out = Vec::new();
    for (k, v) in std::env::vars_os() {
        if extra.iter().any(|(e, _)| *e == k) {
            continue;
        }
        let mut kv = k.into_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        out.extend(CString::new(kv).ok());
    }
    for (k, v) in extra {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        out.extend(CString::new(kv).ok());
    }
    out
}

impl Launched {
    /// Lets the child exec and waits until it has (or has failed to).
    pub fn start(&mut self) -> Result<(), RecError> {
        if let Some(go) = self.go.take() {
            let b = 1u8;
            // SAFETY: writing one byte from a valid buffer to our pipe.
            unsafe { libc::write(go.as_raw_fd(), &b as *const u8 as *const libc::c_void, 1) };
        }
        let mut errno = [0u8; 4];
        // SAFETY: reading at most 4 bytes into a valid buffer. EOF means the exec succeeded
        // (the close-on-exec pipe closed).
        let n = unsafe {
            libc::read(
                self.exec_error.as_raw_fd(),
                errno.as_mut_ptr() as *mut libc::c_void,
                4,
            )
        };
        if n == 4 {
            let e = io::Error::from_raw_os_error(i32::from_ne_bytes(errno));
            return Err(RecError::Io(format!("cannot execute {}", self.program), e));
        }
        Ok(())
    }
}

impl Launched {
    /// Gives up on the child: closing the start pipe makes it exit without running anything.
    pub fn start_never(mut self) {
        self.go = None;
        reap(self.pid);
    }
}

/// Waits for child `pid` to end.
pub fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: waiting for our own child with a valid status pointer.
    unsafe { libc::waitpid(pid as i32, &mut status, 0) };
}

/// The wait status of child `pid` if it ended, without blocking.
pub fn try_wait(pid: u32) -> Option<libc::c_int> {
    let mut status = 0;
    // SAFETY: waiting for our own child with a valid status pointer.
    let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
    (r == pid as i32).then_some(status)
}

/// `rec`'s exit status for a child's wait status: its exit code, or 128+N for signal N.
pub fn exit_status(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}
