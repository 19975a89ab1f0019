//! Issue 28, acceptance 3: `rec --check` names the kernel options it finds missing, from a
//! kernel configuration it reads. On the emulated boards (real Debian 6.1 kernels, see
//! `crossprof_tests::boards`): the kernel's own configuration, found at
//! `/boot/config-$(uname -r)` as distributions install it, names nothing the kernel offers
//! (only `/proc/config.gz`, which Debian leaves out), and a copy with options removed names
//! exactly those. On x86_64, without a board: a configuration made from
//! `rec --print-kernel-options`, edited, plain and gzip.

use std::collections::BTreeSet;
use std::process::Command;

use crossprof_tests::boards::{boot, cache_dir, Board};
use crossprof_tests::*;

/// The options of the `missing options` line of a `rec --check` report.
fn missing(report: &str) -> BTreeSet<String> {
    let line = report
        .lines()
        .find_map(|l| l.strip_prefix("missing options"))
        .unwrap_or_else(|| panic!("no `missing options` line in:\n{report}"))
        .trim();
    assert!(
        !line.starts_with("unknown"),
        "no configuration read:\n{report}"
    );
    line.split_whitespace()
        .filter(|w| *w != "none")
        .map(String::from)
        .collect()
}

/// The `missing from the kernel configuration` line right under the line starting with
/// `name`, if there is one.
fn options_under<'a>(report: &'a str, name: &str) -> Option<&'a str> {
    let mut lines = report.lines();
    lines
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{report}"));
    lines.next().filter(|l| {
        l.trim_start()
            .starts_with("missing from the kernel configuration")
    })
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| format!("CONFIG_{n}")).collect()
}

/// `config` with each of `unset` written as not set, and each of `drop` left out (both as a
/// user would edit a .config); panics unless each was set before.
fn edited(config: &str, unset: &[&str], drop: &[&str]) -> String {
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    for line in config.lines() {
        let name = line
            .strip_prefix("CONFIG_")
            .and_then(|l| l.split_once('='))
            .map(|(n, _)| n);
        match name {
            Some(n) if unset.contains(&n) => {
                out += &format!("# CONFIG_{n} is not set\n");
                seen.insert(n);
            }
            Some(n) if drop.contains(&n) => {
                seen.insert(n);
            }
            _ => out += &format!("{line}\n"),
        }
    }
    for n in unset.iter().chain(drop) {
        assert!(
            seen.contains(n),
            "CONFIG_{n} was not set in the configuration"
        );
    }
    out
}

fn rec_check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(rec())
        .arg("--check")
        .args(args)
        .output()
        .expect("run rec --check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_names_options_missing_from_an_x86_64_configuration() {
    let printed = Command::new(rec())
        .arg("--print-kernel-options")
        .output()
        .expect("run rec --print-kernel-options");
    assert!(printed.status.success());
    let fragment = String::from_utf8_lossy(&printed.stdout).into_owned();
    // What the fragment sets, plus the x86 architecture's own symbols and what the tracer
    // selects, as a kernel build would have them.
    let full = fragment.clone()
        + "CONFIG_X86=y\nCONFIG_X86_64=y\nCONFIG_HAVE_PERF_REGS=y\n\
           CONFIG_HAVE_PERF_USER_STACK_DUMP=y\nCONFIG_HAVE_SYSCALL_TRACEPOINTS=y\n\
           CONFIG_TRACING=y\nCONFIG_EVENT_TRACING=y\nCONFIG_HZ=250\n";
    let dir = scratch().join("kernel_config");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };

    let (code, report, err) = rec_check(&["--kernel-config", &write("full", &full)]);
    assert_eq!(code, 0, "{err}");
    // Nothing missing, and the ARM and RISC-V PMU drivers not asked of an x86 kernel.
    assert_eq!(missing(&report), BTreeSet::new(), "{report}");
    assert!(!report.contains("missing from"), "{report}");

    let cut = edited(
        &full,
        &["PERF_EVENTS", "EVENT_TRACING"],
        &["FTRACE_SYSCALLS", "STACKTRACE"],
    );
    let (code, report, err) = rec_check(&["--kernel-config", &write("cut", &cut)]);
    assert_eq!(code, 0, "{err}");
    let want = set(&[
        "PERF_EVENTS",
        "EVENT_TRACING",
        "FTRACE_SYSCALLS",
        "STACKTRACE",
    ]);
    assert_eq!(missing(&report), want, "{report}");
    assert_eq!(
        options_under(&report, "perf events ").map(str::trim),
        Some("missing from the kernel configuration: CONFIG_PERF_EVENTS=y")
    );
    let syscalls = options_under(&report, "system calls ").unwrap_or_default();
    assert!(
        syscalls.contains("CONFIG_FTRACE_SYSCALLS=y")
            && syscalls.contains("CONFIG_EVENT_TRACING (selected by CONFIG_FTRACE_SYSCALLS"),
        "{report}"
    );
    assert!(
        options_under(&report, "kernel symbols ").is_none(),
        "{report}"
    );

    // The same file gzip-compressed, as /proc/config.gz is.
    let gz = dir.join("cut.gz");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "gzip -9 -c '{}' > '{}'",
            dir.join("cut").display(),
            gz.display()
        ))
        .status()
        .expect("gzip");
    assert!(status.success());
    let (code, report, err) = rec_check(&["--kernel-config", gz.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(missing(&report), want, "{report}");

    // A file that cannot be read is rec's own failure, named.
    let (code, _, err) = rec_check(&["--kernel-config", "/nonexistent/.config"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/.config"), "{err}");
}

/// The board kernel's build configuration (`/boot/config-RELEASE` of its Debian package,
/// kept by tests/boards/setup.sh) and its release, `uname -r` on the board
/// (`6.1.0-56-arm64`).
fn kernel_config(board: Board) -> (std::path::PathBuf, String) {
    let dir = cache_dir().join(board.debian_arch());
    let config = dir.join("config");
    assert!(
        config.exists(),
        "no kernel configuration at {}: run tests/boards/setup.sh",
        config.display()
    );
    let package = std::fs::read_to_string(dir.join("package")).expect("the kernel's package");
    let release = package
        .trim()
        .trim_start_matches("linux-image-")
        .to_string();
    (config, release)
}

/// Boots `board` with its kernel's configuration at `/boot/config-RELEASE` and an edited
/// copy with `unset` and `drop` removed, runs `rec --check` on each, and checks the options
/// it names.
fn check_on_board(board: Board, tag: &str, unset: &[&str], drop: &[&str]) {
    let (config, release) = kernel_config(board);
    let real = std::fs::read_to_string(&config).expect("read the kernel configuration");
    let cut = edited(&real, unset, drop);
    let files = vec![
        (format!("/boot/config-{release}"), real.into_bytes(), 0o644),
        ("/cut.config".to_string(), cut.into_bytes(), 0o644),
    ];
    let job = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let jobs = [
        job(&["/rec", "--check", "--out", "/out/x.zst"]),
        job(&[
            "/rec",
            "--check",
            "--out",
            "/out/x.zst",
            "--kernel-config",
            "/cut.config",
        ]),
    ];
    let run = boot(board, tag, files, &jobs);
    run.assert_ok(2);
    let log = |n: usize| String::from_utf8_lossy(run.file(&format!("job{n}.log"))).into_owned();

    // The kernel's own configuration, found where Debian installs it: the only options it
    // lacks are those of /proc/config.gz, which this kernel indeed does not offer.
    let report = log(0);
    assert!(
        report.contains(&format!("kernel config        /boot/config-{release}\n")),
        "{report}"
    );
    assert!(
        report.contains(&format!("kernel               {release} ")),
        "{report}"
    );
    let ikconfig = set(&["IKCONFIG", "IKCONFIG_PROC"]);
    assert_eq!(missing(&report), ikconfig, "{report}");
    assert_eq!(
        report
            .matches("missing from the kernel configuration")
            .count(),
        1,
        "{report}"
    );
    assert!(
        options_under(&report, "kernel config ").is_some(),
        "{report}"
    );
    for probe in [
        "perf events          yes",
        "kernel symbols       /proc/kallsyms",
        "tracefs              /sys/kernel/tracing",
        "system calls         yes",
        "kernel stacks        /proc/PID/stack",
        "user stacks          yes",
    ] {
        assert!(report.contains(probe), "no `{probe}` in:\n{report}");
    }

    // The edited copy: exactly the removed options, each under its capability.
    let report = log(1);
    let removed: Vec<&str> = unset.iter().chain(drop).copied().collect();
    let want: BTreeSet<String> = set(&removed).union(&ikconfig).cloned().collect();
    assert_eq!(missing(&report), want, "{report}");
    for (line, option) in [
        ("kernel symbols ", "CONFIG_KALLSYMS=y"),
        ("tracefs ", "CONFIG_FTRACE=y"),
        ("system calls ", "CONFIG_FTRACE=y"),
        ("kernel stacks ", "CONFIG_STACKTRACE=y"),
        ("hardware PMU ", "CONFIG_ARM_PMU=y"),
    ] {
        let under = options_under(&report, line).unwrap_or_default();
        assert!(
            under.contains(option),
            "no {option} under `{line}` in:\n{report}"
        );
    }
    eprintln!(
        "{tag}: {} missing from the kernel's configuration, {} from the edited copy",
        ikconfig.len(),
        want.len()
    );
}

const UNSET: &[&str] = &["KALLSYMS", "ARM_PMU"];
const DROP: &[&str] = &["FTRACE", "STACKTRACE"];

#[test]
fn check_names_missing_options_on_the_aarch64_board() {
    check_on_board(Board::Aarch64, "kernel_config_aarch64", UNSET, DROP);
}

#[test]
fn check_names_missing_options_on_the_armv7_board() {
    check_on_board(Board::Armv7, "kernel_config_armv7", UNSET, DROP);
}
