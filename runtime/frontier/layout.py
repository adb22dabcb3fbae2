"""How a frontier's queue and seen-set sit in Redis memory, as Lua functions the scripts of commits and leases share.

One Redis entry per queued request or per fingerprint costs more than the request itself (a sorted-set member carries
~70 bytes of skiplist and dict around it, a set member ~50), so both are packed into strings:

- queue: requests of one priority are appended to a chunk, a string of up to CHUNK_BYTES of length-prefixed payloads
  (`chunkdata`: chunk id → chunk). `chunks` orders the chunks (score = -priority, as before; equal scores by id, an
  8-byte sequence number after a 0x01, so first in, first out). Requests that go back to the queue (a dead shard's,
  a released shard's, kept-back ones now due) go in front of their priority, in chunks whose id starts with 0x00.
  `queued` counts the requests in chunks.
- seen: `seenbuckets`, one hash field per bucket (BUCKET_BITS of the fingerprint's first two bytes), its value the
  bucket's fingerprints' other 10 bytes, one after the other (92 of the 96 bits compared); a lookup scans one bucket
  (~240 entries per million fingerprints).

The layout before these (a sorted set `queue` of sequence number + payload, a set `seen` of 12-byte fingerprints) is
still read: its requests are taken in priority order with the chunks' and its fingerprints count as seen, so a job
that resumes after an upgrade loses neither. Nothing writes to them any more; they go when drained or at the job's end.
A queued request's payload is opaque here (runtime.frontier.codec makes it from a Scrapy request).
"""

from __future__ import annotations

CHUNK_BYTES = 2048
FINGERPRINT_BYTES = 12
BUCKET_BITS = 12  # 4,096 buckets: ~13 bytes a fingerprint from 100k on (~24 per bucket), ~10.5 at a million
# Keys of the queue and seen-set, in the order QUEUE_LIB's `layout(...)` takes them (after `seq`).
QUEUE_KEYS = ("chunks", "chunkdata", "queued", "queue", "seenbuckets", "seen")

# `layout(seq, chunks, chunkdata, queued, legacy queue, seen buckets, legacy seen)` is the table the functions take.
QUEUE_LIB = (
    f"""
local CHUNK_BYTES, WIDTH, SHIFT = {CHUNK_BYTES}, {FINGERPRINT_BYTES - 2}, {2 ** (16 - BUCKET_BITS)}
"""
    + r"""
local FRONT_BASE = 9007199254740992
local function layout(seq, chunks, chunkdata, queued, legacy, buckets, legacy_seen)
  return {seq = seq, chunks = chunks, chunkdata = chunkdata, queued = queued, legacy = legacy,
          buckets = buckets, legacy_seen = legacy_seen}
end
local function entry(payload)
  if #payload < 128 then return string.char(#payload) .. payload end
  return struct.pack('>I3', 8388608 + #payload) .. payload
end
-- The payload at `at` in a chunk and where the next one starts.
local function entry_at(chunk, at)
  local first = string.byte(chunk, at)
  if first < 128 then return string.sub(chunk, at + 1, at + first), at + 1 + first end
  local length = struct.unpack('>I3', chunk, at) - 8388608
  return string.sub(chunk, at + 3, at + 2 + length), at + 3 + length
end
local function new_chunk(q, score, data, front)
  local n = redis.call('INCR', q.seq)
  local id = front and ('\0' .. struct.pack('>I8', FRONT_BASE - n)) or ('\1' .. struct.pack('>I8', n))
  redis.call('ZADD', q.chunks, score, id)
  redis.call('HSET', q.chunkdata, id, data)
end
-- A request that goes back to the queue (a dead or released shard's, a kept-back one now due): in front of those of
-- its priority, in chunks of their own (ids starting 0x00, the newest first).
local function enqueue_front(q, score, payload)
  local data = entry(payload)
  local id = redis.call('ZRANGEBYSCORE', q.chunks, score, score, 'LIMIT', 0, 1)[1]
  local chunk = id and string.byte(id, 1) == 0 and redis.call('HGET', q.chunkdata, id)
  if chunk and #chunk + #data <= CHUNK_BYTES then
    redis.call('HSET', q.chunkdata, id, data .. chunk)
  else
    new_chunk(q, score, data, true)
  end
  redis.call('INCR', q.queued)
end
local function write_chunk(q, score, id, parts)
  if id then redis.call('HSET', q.chunkdata, id, table.concat(parts)) else new_chunk(q, score, table.concat(parts)) end
end
-- Queue {score, payload} requests behind those of their priority, in order: each priority's tail chunk is read and
-- written once for all of them (not once per request: most of a commit's requests share a priority).
local function enqueue_all(q, requests)
  local groups, order = {}, {}
  for _, request in ipairs(requests) do
    local score = request[1]
    if not groups[score] then
      groups[score] = {}
      order[#order + 1] = score
    end
    table.insert(groups[score], entry(request[2]))
  end
  for _, score in ipairs(order) do
    local id = redis.call('ZREVRANGEBYSCORE', q.chunks, score, score, 'LIMIT', 0, 1)[1]
    local parts, size, added = {}, 0, 0
    if id then
      parts[1] = redis.call('HGET', q.chunkdata, id) or ''
      size = #parts[1]
    end
    for _, data in ipairs(groups[score]) do
      if size > 0 and size + #data > CHUNK_BYTES then  -- full: a new chunk for the rest
        if added > 0 then write_chunk(q, score, id, parts) end
        id, parts, size, added = nil, {}, 0, 0
      end
      parts[#parts + 1] = data
      size, added = size + #data, added + 1
    end
    if added > 0 then write_chunk(q, score, id, parts) end
    redis.call('INCRBY', q.queued, #groups[score])
  end
end
-- Up to k of the most urgent requests out of the queue, as {score, payload} pairs (the old layout's too).
local function take(q, k)
  local taken = {}
  while #taken < k do
    local head = redis.call('ZRANGE', q.chunks, 0, 0, 'WITHSCORES')
    local old = redis.call('ZRANGE', q.legacy, 0, 0, 'WITHSCORES')
    if #old > 0 and (#head == 0 or tonumber(old[2]) <= tonumber(head[2])) then
      redis.call('ZREM', q.legacy, old[1])
      taken[#taken + 1] = {old[2], string.sub(old[1], 9)}
    elseif #head == 0 then
      break
    else
      local chunk = redis.call('HGET', q.chunkdata, head[1]) or ''
      local at, got = 1, 0
      while at <= #chunk and #taken < k do
        local payload
        payload, at = entry_at(chunk, at)
        taken[#taken + 1] = {head[2], payload}
        got = got + 1
      end
      if at > #chunk then
        redis.call('ZREM', q.chunks, head[1])
        redis.call('HDEL', q.chunkdata, head[1])
      else
        redis.call('HSET', q.chunkdata, head[1], string.sub(chunk, at))
      end
      redis.call('DECRBY', q.queued, got)
    end
  end
  return taken
end
local function queued_count(q)
  return tonumber(redis.call('GET', q.queued) or '0') + redis.call('ZCARD', q.legacy)
end
-- Adds a fingerprint (FINGERPRINT_BYTES) to the seen-set; false if it was there already.
local function seen_add(q, fingerprint)
  if q.old_seen == nil then q.old_seen = redis.call('EXISTS', q.legacy_seen) == 1 end  -- once per script call
  if q.old_seen and redis.call('SISMEMBER', q.legacy_seen, fingerprint) == 1 then return false end
  local bucket = string.char(math.floor(string.byte(fingerprint, 1) / SHIFT)) .. string.sub(fingerprint, 2, 2)
  local rest = string.sub(fingerprint, 3)
  local values = redis.call('HGET', q.buckets, bucket)
  if not values then
    redis.call('HSET', q.buckets, bucket, rest)
    return true
  end
  local at = string.find(values, rest, 1, true)
  while at do  -- only a match at an entry's start counts: never a false "seen"
    if (at - 1) % WIDTH == 0 then return false end
    at = string.find(values, rest, at + 1, true)
  end
  redis.call('HSET', q.buckets, bucket, values .. rest)
  return true
end
"""
)
