//! Kernel tracepoints sampled with their raw data: found in tracefs by name, with one field of
//! their data (located from the event's `format` file) that becomes each sample's `addr`.
//! Who woke whom (`sched:sched_waking`'s `pid`), system calls (`raw_syscalls:sys_enter`'s
//! `id`, `sys_exit`'s `ret`) and sleep timers (`timer:hrtimer_start`'s `softexpires`) are
//! read this way.
//!
//! A tracepoint can carry a filter (`PERF_EVENT_IOC_SET_FILTER`, as `perf record --filter`):
//! the kernel then writes only the events whose fields match it, e.g. only the sleep timers of
//! `timer:hrtimer_start` (see `super::timers`).
//!
//! Tracepoints need tracefs (for the event's id and layout) and the right to read raw
//! tracepoint data (root or CAP_PERFMON; `perf_event_paranoid` -1 otherwise). Field offsets
//! and sizes differ between kernels and between 32- and 64-bit boards (`long` is 4 bytes on
//! ARMv7), which is why they are read from the board's own `format` files.

use super::attr::{sample, PerfEventAttr};

/// Where tracefs is mounted, newest convention first.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// `PERF_TYPE_TRACEPOINT`.
const TYPE_TRACEPOINT: u32 = 2;

/// One field of a tracepoint's raw data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawField {
    /// Byte offset in the raw data.
    pub offset: u16,
    /// 1, 2, 4 or 8 bytes.
    pub size: u8,
    /// Whether it is sign-extended to 64 bits (a `long` return value).
    pub signed: bool,
}

impl RawField {
    /// The field's value in `raw` (native byte order), widened to 64 bits.
    pub fn read(&self, raw: &[u8]) -> Option<u64> {
        let at = usize::from(self.offset);
        let bytes = raw.get(at..at + usize::from(self.size))?;
        let mut b = [0u8; 8];
        let v = match self.size {
            1 => i64::from(bytes[0] as i8) as u64 & mask(self.signed, 8),
            2 => {
                i64::from(i16::from_ne_bytes(bytes.try_into().ok()?)) as u64 & mask(self.signed, 16)
            }
            4 => {
                i64::from(i32::from_ne_bytes(bytes.try_into().ok()?)) as u64 & mask(self.signed, 32)
            }
            8 => {
                b.copy_from_slice(bytes);
                u64::from_ne_bytes(b)
            }
            _ => return None,
        };
        Some(v)
    }
}

/// All ones when `signed` (keep the sign extension), else the low `bits`.
fn mask(signed: bool, bits: u32) -> u64 {
    if signed {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// A tracepoint this kernel has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracepoint {
    /// Its name as the recording's header lists it (`system:event`).
    pub name: String,
    /// Its id for `perf_event_open`.
    pub id: u64,
    /// The field whose value becomes each sample's `addr`.
    pub field: RawField,
    /// A filter in the kernel's tracepoint filter syntax (`function == 0x...`) set on every
    /// descriptor of the event once opened ([`set_filter`]); `None`: every event.
    pub filter: Option<String>,
}

/// The field `name` of an event's `format` file: the line `field:<type> <name>;` followed by
/// tab-separated `offset:N;`, `size:N;` and `signed:0|1;`.
pub fn field(format: &str, name: &str) -> Option<RawField> {
    let line = format.lines().find(|l| {
        l.trim_start()
            .strip_prefix("field:")
            .and_then(|f| f.split(';').next())
            .and_then(|decl| decl.rsplit([' ', '*']).next())
            == Some(name)
    })?;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';').map(str::trim) {
        if let Some(v) = part.strip_prefix("offset:") {
            offset = v.parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.parse().ok().filter(|s| matches!(s, 1 | 2 | 4 | 8));
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v == "1";
        }
    }
    Some(RawField {
        offset: offset?,
        size: size?,
        signed,
    })
}

/// Where tracefs is mounted here, if anywhere readable.
pub fn root() -> Option<&'static str> {
    TRACEFS
        .into_iter()
        .find(|r| std::path::Path::new(r).join("events").is_dir())
}

/// The tracepoint `system:event` with its field `field_name`, or why it cannot be had.
pub fn find(system: &str, event: &str, field_name: &str) -> Result<Tracepoint, String> {
    let Some(root) = root() else {
        return Err("tracefs is not mounted or not readable for this user".into());
    };
    let dir = format!("{root}/events/{system}/{event}");
    let id = std::fs::read_to_string(format!("{dir}/id")).map_err(|e| format!("{dir}/id: {e}"))?;
    let id = id
        .trim()
        .parse()
        .map_err(|_| format!("{dir}/id is not a number"))?;
    let format = std::fs::read_to_string(format!("{dir}/format")).unwrap_or_default();
    let Some(field) = field(&format, field_name) else {
        return Err(format!("{dir}/format has no field {field_name}"));
    };
    Ok(Tracepoint {
        name: format!("{system}:{event}"),
        id,
        field,
        filter: None,
    })
}

/// The field `field_name` of the tracepoint `system:event`, when tracefs shows it.
pub fn find_field(system: &str, event: &str, field_name: &str) -> Option<RawField> {
    let format =
        std::fs::read_to_string(format!("{}/events/{system}/{event}/format", root()?)).ok()?;
    field(&format, field_name)
}

/// `PERF_EVENT_IOC_SET_FILTER`: `_IOW('$', 6, char *)`. The pointer's size is part of the
/// number (4 bytes on ARMv7 and i686, 8 on 64-bit boards); every architecture rec builds for
/// uses the generic encoding, where "write" is bit 30.
pub const IOC_SET_FILTER: u64 =
    (1 << 30) | ((std::mem::size_of::<usize>() as u64) << 16) | (0x24 << 8) | 6;

/// Sets `filter` on the tracepoint event `fd`: from then on the kernel writes only the events
/// that match it. An event inherited by new threads follows its parent's filter.
pub fn set_filter(fd: &std::os::fd::OwnedFd, filter: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let c = std::ffi::CString::new(filter)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: the kernel reads the NUL-terminated string `c` points to, which outlives the
    // call, and writes nothing to our memory.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_FILTER as _, c.as_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Turns an attribute (period 1) into one that samples the tracepoint with its raw data.
pub fn attr(tp: &Tracepoint, mut a: PerfEventAttr) -> PerfEventAttr {
    a.type_ = TYPE_TRACEPOINT;
    a.config = tp.id;
    a.sample_type |= sample::RAW;
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_from_the_format_file() {
        // Linux 6.1's raw_syscalls:sys_exit on a 64-bit board, and sys_enter on ARMv7.
        let exit = "name: sys_exit\nID: 21\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
            \tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
            \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";
        let ret = field(exit, "ret").unwrap();
        assert_eq!(
            ret,
            RawField {
                offset: 16,
                size: 8,
                signed: true
            }
        );
        assert_eq!(field(exit, "id").unwrap().offset, 8);
        assert_eq!(field(exit, "pid"), None);
        let enter32 = "\tfield:long id;\toffset:8;\tsize:4;\tsigned:1;\n\
            \tfield:unsigned long args[6];\toffset:12;\tsize:24;\tsigned:0;\n";
        assert_eq!(
            field(enter32, "id"),
            Some(RawField {
                offset: 8,
                size: 4,
                signed: true
            })
        );
        // An array field is not a number.
        assert_eq!(field(enter32, "args[6]"), None);
        let waking = "\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n";
        assert_eq!(field(waking, "pid").unwrap().offset, 24);
        let timer = "\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;\n\
            \tfield:s64 softexpires;\toffset:32;\tsize:8;\tsigned:1;\n";
        assert_eq!(field(timer, "hrtimer").unwrap().offset, 8);
        assert_eq!(field(timer, "softexpires").unwrap().offset, 32);
    }

    #[test]
    fn values_are_widened_with_their_sign() {
        let mut raw = vec![0u8; 24];
        raw[8..12].copy_from_slice(&(-9i32).to_ne_bytes());
        raw[16..24].copy_from_slice(&(-2i64).to_ne_bytes());
        let f = |offset, size, signed| RawField {
            offset,
            size,
            signed,
        };
        assert_eq!(f(8, 4, true).read(&raw), Some((-9i64) as u64));
        assert_eq!(f(8, 4, false).read(&raw), Some(0xffff_fff7));
        assert_eq!(f(16, 8, true).read(&raw), Some((-2i64) as u64));
        assert_eq!(f(20, 8, true).read(&raw), None);
    }

    #[test]
    fn the_filter_ioctl_number_carries_the_pointer_size() {
        #[cfg(target_pointer_width = "64")]
        assert_eq!(IOC_SET_FILTER, 0x4008_2406);
        #[cfg(target_pointer_width = "32")]
        assert_eq!(IOC_SET_FILTER, 0x4004_2406);
    }

    #[test]
    fn the_attribute_samples_the_tracepoint_with_its_data() {
        let tp = Tracepoint {
            name: "sched:sched_waking".into(),
            id: 316,
            field: RawField {
                offset: 24,
                size: 4,
                signed: true,
            },
            filter: None,
        };
        let a = attr(&tp, PerfEventAttr::default());
        assert_eq!((a.type_, a.config), (2, 316));
        assert_ne!(a.sample_type & sample::RAW, 0);
    }
}
