// tests/tests/node_jit.rs: a script whose time splits between two JS functions, hot (about
// 3/4 of the loop work) and cold; V8 compiles both, and --perf-basic-prof names them in
// /tmp/perf-PID.map.
function hot(n) { let s = 0; for (let i = 0; i < n; i++) { s = (s + i * 7) % 1000003; } return s; }
function cold(n) { let s = 0; for (let i = 0; i < n; i++) { s = (s + i * 3) % 999983; } return s; }
let t = 0;
const rounds = Number(process.argv[2] || 200);
for (let r = 0; r < rounds; r++) { t += hot(3000000); t += cold(1000000); }
console.log(t);
