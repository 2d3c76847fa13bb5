-- Sliding window counter, one decision, on Redis's clock.
-- KEYS[1]: the client's window, a hash: s = current window's start (µs),
-- c = requests allowed in it, p = in the previous one.
-- ARGV[1]: limit (requests per window); ARGV[2]: window (µs).
-- Returns {allowed (0/1), remaining, reset µs, retry-after µs}.
if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: TIME before a write
local limit, w = tonumber(ARGV[1]), tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local s = redis.call('HMGET', KEYS[1], 's', 'c', 'p')
local start, cur, prev = tonumber(s[1]), tonumber(s[2]) or 0, tonumber(s[3]) or 0
if start == nil then
  start, cur, prev = now, 0, 0
elseif now < start then
  now = start -- a clock stepped back (failover) opens no window
end
local el = now - start
while el >= w do
  if el >= 2 * w then
    prev, cur, start = 0, 0, now - (el % w)
    break
  end
  prev, cur, start = cur, 0, start + w
  el = now - start
end
local used = prev * (1 - (now - start) / w) + cur
local reset = math.ceil(w - (now - start))
if used + 1 > limit then
  -- Refused: the roll above is recomputed alike next time; nothing written.
  return {0, 0, reset, reset}
end
cur = cur + 1
redis.call('HSET', KEYS[1], 's', string.format('%.0f', start), 'c', cur, 'p', prev)
redis.call('PEXPIRE', KEYS[1], math.ceil((2 * w - (now - start)) / 1000)) -- both windows past: a new client's zeros
return {1, math.max(math.floor(limit - used - 1), 0), reset, 0}
