//! The command line: what parses, what is refused, and with which message.

use super::*;

fn run(args: &[&str]) -> Result<Options, String> {
    match parse(args.iter().map(OsString::from))? {
        Parsed::Run(o) => Ok(o),
        Parsed::Print(_) => Err("printed".into()),
        Parsed::Check(..) => Err("check".into()),
        Parsed::Snapshot(_) => Err("snapshot".into()),
    }
}

#[test]
fn command_arguments_are_passed_through() {
    let o = run(&["--out", "x.zst", "./app", "--freq", "-p"]).unwrap();
    assert_eq!(o.out, PathBuf::from("x.zst"));
    assert_eq!(o.freq, 999);
    assert_eq!(
        o.target,
        Target::Launch(vec!["./app".into(), "--freq".into(), "-p".into()])
    );
    let o = run(&["--", "./app"]).unwrap();
    assert_eq!(o.target, Target::Launch(vec!["./app".into()]));
}

#[test]
fn attach_and_limits() {
    let o = run(&["-p", "42", "--duration", "1.5", "--flush-ms", "200"]).unwrap();
    assert_eq!(o.target, Target::Attach(42));
    assert_eq!(o.duration, Some(Duration::from_millis(1500)));
    assert_eq!(o.flush, Duration::from_millis(200));
    assert!(run(&["-p", "42", "./app"]).is_err());
    assert!(run(&[]).is_err());
    assert!(run(&["--freq", "0", "./a"]).is_err());
    assert!(run(&["--call-graph", "lbr", "./a"]).is_err());
    assert!(run(&["--call-graph", "dwarf=70000", "./a"]).is_err());
    assert_eq!(
        run(&["./a"]).unwrap().call_graph,
        CallGraph::default_for_target()
    );
    assert_eq!(
        run(&["--call-graph", "fp", "./a"]).unwrap().call_graph,
        CallGraph::Fp
    );
    assert_eq!(
        run(&["--call-graph", "dwarf", "./a"]).unwrap().call_graph,
        CallGraph::Dwarf(CallGraph::DEFAULT_STACK)
    );
    assert_eq!(
        run(&["--call-graph", "dwarf=1001", "./a"])
            .unwrap()
            .call_graph,
        CallGraph::Dwarf(1000)
    );
    assert!(run(&["--bogus", "./a"]).is_err());
}

#[test]
fn sampled_heap_goes_with_a_launch_and_an_attach() {
    assert!(run(&["--heap", "--heap-sample", "512KiB", "./a"]).is_ok());
    assert!(run(&["--heap", "-p", "42"]).is_ok());
    let o = run(&["--heap", "--heap-sample", "512KiB", "-p", "42"]).unwrap();
    assert_eq!(o.heap_sample, Some(512 * 1024));
}

#[test]
fn events_sampled_at_every_occurrence_default_to_fp_chains() {
    let cg = |args: &[&str]| run(args).unwrap().call_graph;
    assert_eq!(cg(&["-e", "page-faults", "./a"]), CallGraph::Fp);
    assert_eq!(cg(&["-e", "major-faults,cpu-clock", "./a"]), CallGraph::Fp);
    assert_eq!(cg(&["-e", "context-switches", "./a"]), CallGraph::Fp);
    assert_eq!(
        cg(&["-e", "cpu-clock,page-faults", "./a"]),
        CallGraph::default_for_target()
    );
    // An explicit choice wins, whichever comes first on the command line.
    assert_eq!(
        cg(&["--call-graph", "dwarf=4096", "-e", "page-faults", "./a"]),
        CallGraph::Dwarf(4096)
    );
    assert!(CallGraph::Fp
        .lost_advice(Kind::PageFaults)
        .contains("fewer events"));
    assert!(CallGraph::Dwarf(8)
        .lost_advice(Kind::PageFaults)
        .contains("--call-graph fp"));
    assert!(CallGraph::Dwarf(8)
        .lost_advice(Kind::CpuClock)
        .contains("--freq"));
}

#[test]
fn heap_flags() {
    let o = run(&["--heap", "--no-cpu", "./app"]).unwrap();
    assert!(o.heap && !o.cpu);
    let o = run(&["./app", "--heap"]).unwrap();
    assert!(!o.heap && o.cpu, "flags after COMMAND belong to it");
    assert_eq!(
        run(&["--heap", "-p", "1"]).unwrap().target,
        Target::Attach(1)
    );
    assert!(run(&["--no-cpu", "./app"]).is_err());
}

#[test]
fn check_needs_no_command() {
    let Ok(Parsed::Check(out, None)) =
        parse(["--check", "--out", "/data/x.zst"].map(OsString::from))
    else {
        panic!("not a check")
    };
    assert_eq!(out, PathBuf::from("/data/x.zst"));
    let Ok(Parsed::Check(_, Some(config))) =
        parse(["--check", "--kernel-config", "linux/.config"].map(OsString::from))
    else {
        panic!("not a check of a kernel configuration")
    };
    assert_eq!(config, PathBuf::from("linux/.config"));
    assert!(run(&["--kernel-config", "x", "./app"]).is_err());
}

#[test]
fn event_lists() {
    assert_eq!(run(&["./app"]).unwrap().events, vec![Kind::CpuClock]);
    let o = run(&["-e", "minor-faults,cpu-clock", "./app"]).unwrap();
    assert_eq!(o.events, vec![Kind::MinorFaults, Kind::CpuClock]);
    assert!(run(&["-e", "bogus", "./app"]).is_err());
    assert!(run(&["--off-cpu", "-e", "cs", "./app"]).is_err());
}

#[test]
fn system_wide() {
    let o = run(&["-a", "--duration", "2"]).unwrap();
    assert_eq!(o.target, Target::System);
    assert_eq!(run(&["--all-cpus"]).unwrap().target, Target::System);
    assert!(run(&["-a", "./app"]).unwrap_err().contains("-a"));
    assert!(run(&["-a", "-p", "1"]).is_err());
    assert!(run(&["-a", "--heap"]).unwrap_err().contains("--heap"));
}

#[test]
fn max_size() {
    assert_eq!(run(&["./app"]).unwrap().max_size, None);
    let o = run(&["-a", "--max-size", "10M"]).unwrap();
    assert_eq!(o.max_size, Some(10_000_000));
    assert!(run(&["--max-size", "1K", "./app"]).is_err());
    let o = run(&["--max-size", "1M", "--heap", "./app"]).unwrap();
    assert!(o.heap && o.max_size == Some(1_000_000));
}

#[test]
fn off_cpu_flag() {
    let o = run(&["--off-cpu", "./app"]).unwrap();
    assert!(o.off_cpu && o.cpu);
    assert_eq!(o.off_cpu_stack, 2048);
    assert!(o.wakeups && !o.syscalls);
    let o = run(&["-e", "syscalls", "./app"]).unwrap();
    assert!(o.syscalls && o.events == vec![Kind::CpuClock]);
    let o = run(&["-e", "task-clock,syscalls", "./app"]).unwrap();
    assert!(o.syscalls && o.events == vec![Kind::TaskClock]);
    assert!(
        run(&["--no-cpu", "-e", "syscalls", "./app"])
            .unwrap()
            .syscalls
    );
    assert!(run(&["-e", "syscalls,bogus", "./app"]).is_err());
    assert!(
        !run(&["--off-cpu", "--no-wakeups", "./app"])
            .unwrap()
            .wakeups
    );
    let o = run(&["--off-cpu", "--off-cpu-stack", "8191", "./app"]).unwrap();
    assert_eq!(o.off_cpu_stack, 8184);
    assert!(run(&["--off-cpu", "--off-cpu-stack", "65536", "./app"]).is_err());
    assert!(run(&["--off-cpu", "--off-cpu-stack", "0", "./app"]).is_err());
    assert!(!run(&["./app"]).unwrap().off_cpu);
    let o = run(&["--off-cpu", "--no-cpu", "-p", "7"]).unwrap();
    assert!(o.off_cpu && !o.cpu);
}
