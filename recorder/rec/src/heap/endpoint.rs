//! rec's side of the hand-over: an abstract Unix socket that each preloaded process connects
//! to once, sending a `Hello` and its ring's memfd. Non-blocking throughout: a producer never
//! waits for rec to accept (the kernel queues the connection and the message), and rec picks
//! new connections up on its next tick.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crossprof_heap_wire::Hello;

/// The listening socket.
pub struct Endpoint {
    sock: OwnedFd,
    /// The abstract name (without the leading NUL), for the environment of the application.
    pub name: String,
    pending: Vec<OwnedFd>,
    /// Rings refused (a hello that is not this version's), see `ring::refuse`.
    pub refused: u64,
}

/// A process that handed over its ring.
pub struct Arrival {
    /// What it said.
    pub hello: Hello,
    /// The ring's memfd.
    pub memfd: OwnedFd,
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl Endpoint {
    /// Listens on a fresh abstract name.
    pub fn listen() -> io::Result<Endpoint> {
        let name = format!(
            "crossprof-heap-{}-{}",
            std::process::id(),
            crate::clock::monotonic_ns()
        );
        // SAFETY: plain socket calls with valid, local arguments.
        unsafe {
            let s = libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            );
            if s < 0 {
                return Err(io::Error::last_os_error());
            }
            let sock = OwnedFd::from_raw_fd(s);
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (i, b) in name.bytes().enumerate() {
                addr.sun_path[1 + i] = b as libc::c_char;
            }
            let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as u32;
            if libc::bind(s, &addr as *const _ as *const libc::sockaddr, len) != 0
                || libc::listen(s, 4096) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(Endpoint {
                sock,
                name,
                pending: Vec::new(),
                refused: 0,
            })
        }
    }

    /// The listening descriptor, to poll on.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Accepts what is waiting and returns every completed hand-over.
    pub fn arrivals(&mut self) -> Vec<Arrival> {
        loop {
            // SAFETY: accept4 on our listening socket; no address is requested.
            let c = unsafe {
                libc::accept4(
                    self.sock.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if c < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                break;
            }
            // SAFETY: accept4 returned a new descriptor nothing else owns.
            self.pending.push(unsafe { OwnedFd::from_raw_fd(c) });
        }
        let mut out = Vec::new();
        let mut refused = 0;
        self.pending.retain(|c| match receive(c) {
            Received::Wait => true,
            Received::Done(a) => {
                out.push(a);
                false
            }
            Received::Refused => {
                refused += 1;
                false
            }
            Received::Bad => false,
        });
        self.refused += refused;
        out
    }
}

enum Received {
    Wait,
    Done(Arrival),
    /// A ring came with a hello rec does not understand; it was closed.
    Refused,
    Bad,
}

fn receive(c: &OwnedFd) -> Received {
    let mut buf = [0u8; Hello::BYTES];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data, filled with pointers to live local buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg into the buffers above.
    let n = unsafe { libc::recvmsg(c.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return if errno() == libc::EAGAIN || errno() == libc::EINTR {
            Received::Wait
        } else {
            Received::Bad
        };
    }
    // Collect every descriptor passed, so none leaks whatever the message says.
    let mut fds = Vec::new();
    // SAFETY: walking the control buffer the kernel filled, with the libc macros.
    unsafe {
        let mut cm = libc::CMSG_FIRSTHDR(&msg);
        while !cm.is_null() {
            if (*cm).cmsg_level == libc::SOL_SOCKET && (*cm).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cm) as *const i32;
                let count = ((*cm).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cm = libc::CMSG_NXTHDR(&msg, cm);
        }
    }
    let hello = Hello::from_bytes(&buf[..n as usize]);
    match (hello, fds.into_iter().next()) {
        (Some(hello), Some(memfd)) => Received::Done(Arrival { hello, memfd }),
        (None, Some(memfd)) => {
            // An interposer of another version: it must not wait for a reader that never comes.
            super::ring::refuse(&memfd);
            Received::Refused
        }
        _ => Received::Bad,
    }
}
