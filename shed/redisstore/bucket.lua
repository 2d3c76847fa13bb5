-- Token bucket, one decision, on Redis's clock.
-- KEYS[1]: the client's bucket, a hash: n = tokens, t = time of n (µs).
-- ARGV[1]: rate (tokens per second); ARGV[2]: burst.
-- Returns {allowed (0/1), remaining, reset µs, retry-after µs}.
if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: TIME before a write
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local s = redis.call('HMGET', KEYS[1], 'n', 't')
local tokens, t = tonumber(s[1]), tonumber(s[2])
if tokens == nil or t == nil then
  tokens = burst -- absent: full (it expired when it would have been)
elseif now > t then
  tokens = math.min(burst, tokens + (now - t) * rate / 1000000)
end -- a clock stepped back (failover) refills nothing
if tokens < 1 then
  -- Refused, nothing taken: the stored state and its expiry stand.
  return {0, 0, math.ceil((burst - tokens) / rate * 1000000), math.ceil((1 - tokens) / rate * 1000000)}
end
tokens = tokens - 1
local reset = math.ceil((burst - tokens) / rate * 1000000)
redis.call('HSET', KEYS[1], 'n', string.format('%.17g', tokens), 't', string.format('%.0f', now))
redis.call('PEXPIRE', KEYS[1], math.ceil(reset / 1000)) -- gone when it would be full again
return {1, math.floor(tokens), reset, 0}
