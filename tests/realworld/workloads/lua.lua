-- The Lua workload (deterministic): deep recursion through Lua and C (pcall, sort
-- comparators, string.gsub callbacks), table building, string work and the garbage collector.
-- `lua bench.lua [ROUNDS] [SIZE]`: 10 rounds over 60,000 items unless told (the boards'
-- emulated CPUs run a small fraction).
local rounds = tonumber(arg and arg[1]) or 10
local size = tonumber(arg and arg[2]) or 60000
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

-- Recursion that crosses into C and back at every level.
local function nested(n)
  if n == 0 then
    local t = {}
    for i = 1, 200 do t[i] = (i * 7919) % 211 end
    table.sort(t, function(a, b) return a > b end)
    return t[1]
  end
  local ok, v = pcall(nested, n - 1)
  return ok and v + 1 or 0
end

local function words(n)
  local parts = {}
  for i = 1, n do
    parts[#parts + 1] = string.format("w%05d", (i * 104729) % 99991)
  end
  local text = table.concat(parts, " ")
  local count = 0
  text:gsub("w(%d+)", function(d) count = count + #d end)
  return count
end

local function tables(n)
  local t = {}
  for i = 1, n do
    t[i] = { id = i, name = "item" .. i, score = (i * 31) % 1000 }
  end
  table.sort(t, function(a, b)
    if a.score ~= b.score then return a.score < b.score end
    return a.id < b.id
  end)
  local index = {}
  for _, v in ipairs(t) do index[v.name] = v end
  local sum = 0
  for i = 1, n, 7 do sum = sum + index["item" .. i].score end
  return sum
end

local total = 0
for _ = 1, rounds do
  total = total + fib(27)
  for _ = 1, 40 do total = total + nested(60) end
  total = total + words(size)
  total = total + tables(size)
  collectgarbage()
end
print(total)
