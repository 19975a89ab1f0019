// tests/tests/node_jit.rs: a script whose time splits between two JS functions, hot (about
// 3/4 of the loop work) and cold; V8 compiles both, and --perf-basic-prof names them in
// /tmp/perf-PID.map.
// It runs rounds until the process has used SECS seconds of CPU time, so that a recording of
// it holds about as many samples on any processor and under any load.
// Usage: node hot.js SECS
function hot(n) { let s = 0; for (let i = 0; i < n; i++) { s = (s + i * 7) % 1000003; } return s; }
function cold(n) { let s = 0; for (let i = 0; i < n; i++) { s = (s + i * 3) % 999983; } return s; }
const secs = Number(process.argv[2] || 1);
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
let t = 0;
while (cpu() < secs) { t += hot(3000000); t += cold(1000000); }
console.log(t);
