-- In-flight slots of one domain, as one holder (a crawl process) gives them back or renews its hold.
-- The hash holder -> "count expiry" is the one buckets.lua takes slots in (see there).
--
-- KEYS[1] the domain's slots hash
-- ARGV[1] holder; ARGV[2] mode; ARGV[3] count; ARGV[4] lease seconds (a new expiry is now + lease)
--   "release": give back `count` slots;
--   "renew": push the expiry, and count at least `count`, the holder's own tally. Never less than what is stored:
--            Redis counts a grant before the holder does and a release after it, so a stored count above the tally
--            is a take or release still under way; one below it means the entry was lost (Redis emptied, expired)
--            while requests were in flight;
--   "set": the holder counts exactly `count` (its tally, sent while none of its takes and releases was under way:
--          whatever a lost reply or a retried script left above or below the tally is corrected);
--   "drop": the holder holds nothing (its crawl is over).
-- Returns the holder's count afterwards. A holder at 0 is removed.

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local current = redis.call('HGET', KEYS[1], ARGV[1])
local count = 0
if current then count = tonumber(string.match(current, '^(%S+)')) end
if count == nil or count ~= count or math.abs(count) == math.huge then count = 0 end  -- not a count (buckets.lua)
if ARGV[2] == 'release' then
  if not current then return 0 end
  count = count - tonumber(ARGV[3])
elseif ARGV[2] == 'renew' then
  count = math.max(count, tonumber(ARGV[3]))
elseif ARGV[2] == 'set' then
  count = tonumber(ARGV[3])
else
  count = 0
end
if count <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
local lease = tonumber(ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d %.6f', count, now + lease))
redis.call('PEXPIRE', KEYS[1], math.ceil((lease + 60) * 1000))
return count
