-- Allocation-heavy Lua for bench/heap_real.py: strings and small tables, most of them
-- garbage soon (Lua's allocator is realloc-based). About 5 allocations per iteration:
-- 3,000,000 iterations (the default) make 15.2 M allocations with Debian's lua5.4.
local n = tonumber(arg[1]) or 3000000
local keep = {}
local total = 0
for i = 1, n do
  local s = tostring(i) .. "-" .. (i % 97)
  local t = { s, i, name = s }
  keep[i % 5000 + 1] = t
  total = total + #t[1]
end
print(total)
