-- Politeness token buckets, shared by every worker: one per domain and one per (egress IP, domain).
--
-- KEYS[1] rule of the exact host        KEYS[2] rule of the registered domain    KEYS[3] "rules loaded" marker
-- KEYS[4] bucket of the exact host      KEYS[5] bucket of (egress IP, exact host)
-- KEYS[6] bucket of the domain          KEYS[7] bucket of (egress IP, domain)
-- KEYS[8] adaptive state of the exact host   KEYS[9] adaptive state of the registered domain
-- KEYS[10] in-flight slots of the exact host  KEYS[11] in-flight slots of the registered domain
-- KEYS[12] robots.txt cap of the exact host   KEYS[13] robots.txt cap of the registered domain
-- ARGV[1] "take" or "pause"; ARGV[2] the defaults, as a rule (below: every field; rules mirrored without the
-- adaptive or concurrency field take the defaults'); ARGV[3] the bounds "max_pause min_factor" (below); ARGV[4] tokens
-- wanted (requests of one worker waiting for these buckets together), or the pause's seconds; ARGV[5] slot holder
-- ("" = take no slots); ARGV[6] slot lease seconds;
-- ARGV[7] wait_ms when every slot is held; ARGV[8] reserve_ms: a take that finds no token may still take the next
-- one if it comes within this many ms (0: never); ARGV[9], ARGV[10] (optional) slots the holder gives back first,
-- of the exact host's and of the domain's (its requests that ended since: one call instead of a release each)
-- (Few arguments on purpose: each one costs the client packing it and Redis a string, on every request.)
--
-- Returns {status, wait_ms, rule, granted, busy, free}: status 1 = granted (pause: done), 0 = wait wait_ms and ask
-- again, 2 = granted the token that comes in wait_ms (send the request then, not before), -1 = domain blocked, -2 =
-- rules not loaded into Redis yet; rule 1 = exact host, 2 = domain, 3 = defaults; free (with a holder) = the domain's
-- slots left free after the grant.
-- A reserved token is taken now, so both buckets go below zero until it comes: the next take waits from when that
-- token comes, not from when its request was sent, and a crawl whose wake-ups run late still gets the whole rate.
-- Never more often than the rate: every request is sent at or after its token's time.
-- A take grants as many of the tokens wanted as both buckets hold (at least one, or none and a wait); wait_ms is then
-- when the next token comes, for the requests that got none.
-- With a holder, a take also takes one in-flight slot per token (never more tokens than free slots); busy = 1 when it
-- waits because every slot is held. Slots are a hash holder -> "count expiry": a holder (one crawl process) gives
-- them back as its requests end and renews its expiry while it holds some (throttling/slots.lua); a holder whose
-- expiry passed (a killed worker) counts for nothing and is removed here.
--
-- A rule is the string "rate burst ip_rate ip_burst scale blocked adaptive concurrency obey max_pages" (rates in
-- tokens/s, flags 0 or 1, concurrency the slots; rules mirrored before a field existed lack it and take the default).
-- A robots.txt cap "rate burst delay" (throttling/robots.py: what the site's Crawl-delay / Request-rate asks for) is
-- a ceiling on both buckets of a rule that obeys it (`obey`, default 1): it lowers the rates, never raises them.
-- An adaptive rule's rates are also multiplied by the factor the controller keeps in the adaptive state
-- (its first word, throttling/adaptive.py AdaptiveState.as_redis); no state is a factor of 1.
-- A bucket is the string "tokens ts": `tokens` as of time `ts` (seconds, from Redis TIME, never a worker's clock).
-- A missing bucket is a full one, so keys expire once they would have refilled anyway. A pause empties the
-- domain bucket and moves its `ts` into the future: nothing refills, nobody takes, until then.
-- Plain strings, all read with one MGET (rules, marker, controller states and the four buckets the take may use) and
-- written with one SET each: every redis.call costs a script far more than the few bytes of a value never used.
--
-- What crawls write here (buckets, slots, controller states, robots.txt caps) is read as written by a hostile one: a
-- packaged crawl's child writes these keys with a Redis user of its own, and its code is its uploader's. A value that
-- is not what this script or the controller writes counts as absent (never a script error, which would stop every take
-- of the domain), a controller factor counts within [min_factor, 1] (never above the rule's rate, never below what the
-- controller itself would cut to), a robots.txt cap asks for a delay of max_pause at most, a bucket never holds its
-- domain longer than max_pause (at least a minute: reserved tokens hold it a second or so) and one token, no wait or
-- key lifetime is longer than NEVER (a rate of 1e-300 is not 0, and would make numbers Redis refuses), and a slot
-- holder's expiry is never further than one lease ahead. The rule mirror is not the child's to write (its user reads it
-- only).

local NEVER = 86400  -- the wait reported, and the key lifetime, when a rate is 0

-- A finite number, or nil (Lua's tonumber reads "nan" and "inf" too).
local function number(text)
  local value = tonumber(text)
  if value == nil or value ~= value or value == math.huge or value == -math.huge then return nil end
  return value
end
local max_pause, min_factor = string.match(ARGV[3], '^(%S+) (%S+)')
local hold = math.max(number(max_pause) or NEVER, 60)
min_factor = math.min(math.max(number(min_factor) or 0, 0), 1)

local found = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3], KEYS[8], KEYS[9], KEYS[6], KEYS[7], KEYS[4], KEYS[5],
  KEYS[12], KEYS[13])

-- The exact host's rule beats the registered domain's; with neither, the caller's defaults. One match reads it all.
local which, rule = 3, ARGV[2]
if found[1] then which, rule = 1, found[1] elseif found[2] then which, rule = 2, found[2] end
local rate, cap, ip_rate, ip_cap, scale, blocked, adaptive, concurrency, obey =
  string.match(rule, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) ?(%S*) ?(%S*) ?(%S*)')
if adaptive == '' or concurrency == '' then
  local default_adaptive, default_concurrency = string.match(ARGV[2], '^%S+ %S+ %S+ %S+ %S+ %S+ (%S+) (%S+)')
  if adaptive == '' then adaptive = default_adaptive end
  if concurrency == '' then concurrency = default_concurrency end
end
scale = tonumber(scale)
local state = found[5]
if which == 1 then state = found[4] end
local factor = state and number(string.match(state, '^(%S+)'))
if adaptive == '1' and factor then scale = scale * math.min(1, math.max(min_factor, factor)) end
rate, cap = tonumber(rate) * scale, math.max(1, tonumber(cap))
ip_rate, ip_cap = tonumber(ip_rate) * scale, math.max(1, tonumber(ip_cap))
local robots = found[11]
if which == 1 then robots = found[10] end
local robots_rate, robots_cap
if robots then robots_rate, robots_cap = string.match(robots, '^(%S+) (%S+)') end
robots_rate, robots_cap = number(robots_rate), number(robots_cap)
if robots_rate and robots_cap and robots_rate > 0 and obey ~= '0' then
  robots_rate, robots_cap = math.max(robots_rate, 1 / hold), math.max(1, robots_cap)  -- a Crawl-delay up to `hold`
  rate, cap = math.min(rate, robots_rate), math.min(cap, robots_cap)
  ip_rate, ip_cap = math.min(ip_rate, robots_rate), math.min(ip_cap, robots_cap)
end
local domain_key, ip_key, slots_key, bucket, ip_bucket = KEYS[6], KEYS[7], KEYS[11], found[6], found[7]
if which == 1 then domain_key, ip_key, slots_key, bucket, ip_bucket = KEYS[4], KEYS[5], KEYS[10], found[8], found[9] end
local holder = ARGV[5] or ''

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000

local function refill(bucket, bucket_rate, bucket_cap)
  local tokens, ts
  if bucket then tokens, ts = string.match(bucket, '^(%S+) (%S+)$') end
  tokens, ts = number(tokens), number(ts)
  if not tokens or not ts then return bucket_cap, now end
  ts = math.min(ts, now + hold)  -- and what it owes at most the rest of `hold`: held `hold` and a token at most
  if bucket_rate > 0 then tokens = math.max(tokens, math.min(0, 1 - bucket_rate * (hold - math.max(0, ts - now)))) end
  if now > ts then
    tokens, ts = tokens + (now - ts) * bucket_rate, now
  end
  return math.min(tokens, bucket_cap), ts
end

local function save(key, tokens, ts, bucket_rate, bucket_cap)
  local full = NEVER
  if bucket_rate > 0 then full = math.min(NEVER, (bucket_cap - tokens) / bucket_rate) end
  -- Formatted here: Lua would print numbers with 14 digits, too few for microseconds since 1970.
  local value = string.format('%.17g %.6f', tokens, ts)
  redis.call('SET', key, value, 'PX', math.ceil((ts - now + full + 60) * 1000))
end

local function wait(tokens, ts, bucket_rate)
  if tokens >= 1 then return 0 end
  if bucket_rate <= 0 then return NEVER end
  return math.min(NEVER, (ts - now) + (1 - tokens) / bucket_rate)
end

if ARGV[1] == 'pause' then
  local tokens, ts = refill(bucket, rate, cap)
  local resume = now + math.min(number(ARGV[4]) or 0, hold)
  if resume > ts then
    save(domain_key, 0, resume, rate, cap)
    ts = resume
  end
  return {1, math.ceil((ts - now) * 1000), which}
end

-- Free in-flight slots of the domain (holders past their expiry dropped), and this holder's current count.
local function free_slots()
  local limit = tonumber(concurrency)
  local held, used, mine = redis.call('HGETALL', slots_key), 0, 0
  local lease = number(ARGV[6]) or 0
  for i = 1, #held, 2 do
    local count, expires = string.match(held[i + 1], '^(%S+) (%S+)$')
    count, expires = number(count), number(expires)
    if not count or not expires or expires <= now then
      redis.call('HDEL', slots_key, held[i])
    else
      if expires > now + lease then  -- no holder renews further ahead: this one stops counting a lease from now
        redis.call('HSET', slots_key, held[i], string.format('%d %.6f', count, now + lease))
      end
      used = used + math.max(count, 0)
      if held[i] == holder then mine = math.max(count, 0) end
    end
  end
  return limit - used, mine
end

-- As slots.lua's "release", before anything else: the take that carries them may use the slots they free.
local function give_back(key, count)
  count = tonumber(count) or 0
  local current = count > 0 and holder ~= '' and redis.call('HGET', key, holder)
  if not current then return end
  local held, expires = string.match(current, '^(%S+) (%S+)$')
  held = (number(held) or 0) - count
  if held <= 0 or not number(expires) then
    redis.call('HDEL', key, holder)
  else
    redis.call('HSET', key, holder, held .. ' ' .. expires)
  end
end
give_back(KEYS[10], ARGV[9])
give_back(KEYS[11], ARGV[10])

if not found[3] then return {-2, 0, which} end
if blocked == '1' then return {-1, 0, which} end
local wanted, mine, free = tonumber(ARGV[4]) or 1, 0, 0
if holder ~= '' then
  free, mine = free_slots()
  if free < 1 then return {0, tonumber(ARGV[7]), which, 0, 1} end
  wanted = math.min(wanted, free)
end
local tokens, ts = refill(bucket, rate, cap)
local ip_tokens, ip_ts = refill(ip_bucket, ip_rate, ip_cap)
local function grant(granted)
  tokens, ip_tokens = tokens - granted, ip_tokens - granted
  save(domain_key, tokens, ts, rate, cap)
  save(ip_key, ip_tokens, ip_ts, ip_rate, ip_cap)
  if holder ~= '' then
    local lease = tonumber(ARGV[6])
    redis.call('HSET', slots_key, holder, string.format('%d %.6f', mine + granted, now + lease))
    redis.call('PEXPIRE', slots_key, math.ceil((lease + 60) * 1000))
  end
end
if tokens >= 1 and ip_tokens >= 1 then
  local granted = math.min(wanted, math.floor(tokens), math.floor(ip_tokens))
  grant(granted)
  local rest = math.max(wait(tokens, ts, rate), wait(ip_tokens, ip_ts, ip_rate))
  return {1, math.ceil(rest * 1000), which, granted, 0, free - granted}
end
local delay = math.max(wait(tokens, ts, rate), wait(ip_tokens, ip_ts, ip_rate))
if delay * 1000 <= (tonumber(ARGV[8]) or 0) then
  grant(1)
  return {2, math.ceil(delay * 1000), which, 1, 0, free - 1}
end
return {0, math.ceil(delay * 1000), which}
