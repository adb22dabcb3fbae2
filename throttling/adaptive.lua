-- Adaptive politeness: gather one window of every worker's responses for a domain, atomically.
--
-- KEYS[1] rule of the exact host     KEYS[2] rule of the registered domain
-- KEYS[3] window of the exact host   KEYS[4] window of the registered domain
-- ARGV[1] responses observed (and timeouts); ARGV[2] how many of them were errors; ARGV[3] the sum of their latencies
-- in seconds; ARGV[4] how many had a latency (a timeout has none); ARGV[5] window seconds; ARGV[6] least responses in
-- a window; ARGV[7] 1 if rules without the field are adaptive; ARGV[8] the error share above which a window that holds
-- enough responses closes early; ARGV[9] how early (a share of the window's seconds); ARGV[10] how many errors are
-- enough for that (fewer than ARGV[6]: each more is a refused request sent at a rate the site already refuses). A
-- worker sends what it saw of a host every moment in one call, not one call per response.
-- A window whose answers are errors closes as soon as it holds enough of them and ARGV[9] of its time passed: a site
-- that started refusing is relieved within a fraction of a window, not after all of it at the rate it refuses.
--
-- The window is the key of whoever's rule the bucket script uses: the exact host's if it has a rule, else the
-- registered domain's (defaults too). Returns {0} while the window is open or the rule is not adaptive, else
-- {1, which, requests, errors, latency_sum, latencies} and the window starts again empty: exactly one caller gets
-- each closed window and applies the rule (throttling/adaptive.py) to it.

local found = redis.call('MGET', KEYS[1], KEYS[2])
local which, rule = 2, found[2]
if found[1] then which, rule = 1, found[1] end
local adaptive = ARGV[7]
if rule then adaptive = string.match(rule, '^%S+ %S+ %S+ %S+ %S+ %S+ (%S+)') or adaptive end
if adaptive ~= '1' then return {0} end

local key = KEYS[4]
if which == 1 then key = KEYS[3] end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local span = tonumber(ARGV[5])
local w = redis.call('HMGET', key, 'n', 'err', 'sum', 'timed', 'start')
local n, err, sum, timed, start = tonumber(w[1]) or 0, tonumber(w[2]) or 0, tonumber(w[3]) or 0, tonumber(w[4]) or 0,
  tonumber(w[5]) or now
-- A stale window tells nothing; nor does one no worker wrote (a packaged crawl's child writes these keys too: counts
-- that are not counts, or a start ahead of now, would keep the window from ever closing).
local function counted(value) return value == value and value >= 0 and value < 1e12 end
local readable = counted(n) and counted(err) and counted(sum) and counted(timed) and err <= n and timed <= n
if not readable or not (start <= now) or now - start > 30 * span + 30 then
  n, err, sum, timed, start = 0, 0, 0, 0, now
end
n, err = n + tonumber(ARGV[1]), err + tonumber(ARGV[2])
sum, timed = sum + tonumber(ARGV[3]), timed + tonumber(ARGV[4])
local erring = err > n * tonumber(ARGV[8] or 1) and now - start >= span * tonumber(ARGV[9] or 1)
local enough = tonumber(ARGV[6])
if (n >= enough and now - start >= span) or (erring and err >= math.min(enough, tonumber(ARGV[10] or enough))) then
  redis.call('DEL', key)
  return {1, which, n, err, string.format('%.6f', sum), timed}
end
redis.call('HSET', key, 'n', n, 'err', err, 'sum', string.format('%.6f', sum), 'timed', timed,
  'start', string.format('%.6f', start))
redis.call('EXPIRE', key, math.ceil(30 * span) + 60)
return {0}
