"""The Lua scripts of :class:`~tdk.runner.RedisStore`: the runner's state changes, run by Redis.

Each script is the server-side twin of one change of ``tdk.runner`` (``admit``, ``acquire``,
``record``, ``peek``), with the same rules, applied in one atomic step and timed by the Redis
server's own clock (``TIME``, in microseconds), so that worker clocks do not matter. Times
and durations are whole microseconds (exact in Lua's doubles until the year 2255). ``ENTER``
is ``acquire`` then ``admit`` in one step: a call with a circuit and a limiter enters in one
round trip.

- The limiter's log is a sorted set of admission times; the answer is the wait until the
  oldest entry that keeps the window full leaves it (0: admitted).
- A circuit is a hash (``state``, ``failures``, ``opened_at``, ``probes``, ``probes_expire``,
  ``generation``); a report from an earlier generation changes nothing, and probes expire.

Every write renews the key's time to live (a circuit's is never shortened: a probe admitted
with a long lifetime may still be out): idle state goes away. A script returns integers
(Redis turns Lua numbers into integers) and state names; -1 stands for "none".

A key that holds something else than its state (a value of another type, a log with more
entries than its limit allows) is that key's problem, not an outage: the script deletes it
and goes on as if it held nothing, in the same atomic step, and the last element of its
answer says what the key held ('' when it was sound), for the store to warn about.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ACQUIRE", "ADMIT", "ENTER", "PEEK", "RECORD"]

# The limiter's admission, a function of the log's key: the body of ADMIT and half of ENTER.
_ADMIT_LOG: Final = """
local function admit_log(key, calls, period, member, ttl)
  local replaced = ''
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  calls = tonumber(calls)
  period = tonumber(period)
  local trimmed = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', now - period)
  if type(trimmed) == 'table' and trimmed['err'] then
    replaced = redis.call('TYPE', key)['ok']  -- (WRONGTYPE: a value of another type)
    redis.call('DEL', key)
  end
  local count = redis.call('ZCARD', key)
  -- The key names its limit, and no admission adds past it: a longer log is none of ours
  -- (and reading it whole below would cost what its planter chose).
  if count > calls then
    redis.call('DEL', key)
    replaced = 'zset longer than its limit'
    count = 0
  end
  -- Entries later than now (a server whose clock stepped back, a failover to a replica
  -- behind it) count as made now, as in process: no wait is ever longer than the period.
  -- (Their new scores leave the count as it is.)
  -- (Numbers joined into text are formatted whole: Lua's own tostring keeps 14 digits, and a
  -- time in microseconds has 16.)
  local later = redis.call('ZRANGEBYSCORE', key, string.format('(%.0f', now), '+inf')
  for _, entry in ipairs(later) do redis.call('ZADD', key, now, entry) end
  if count < calls then
    redis.call('ZADD', key, now, string.format('%.0f:%s', now, member))
    redis.call('PEXPIRE', key, ttl)
    return {0, replaced}
  end
  redis.call('PEXPIRE', key, ttl)  -- (a refusal renews it too: a log never lingers)
  local oldest = redis.call('ZRANGE', key, count - calls, count - calls, 'WITHSCORES')
  local wait = tonumber(oldest[2]) + period - now
  if wait > period then wait = period end
  if wait < 1 then wait = 1 end
  return {wait, replaced}
end
"""

#: KEYS[1]: the log. ARGV: calls, period (us), a unique member suffix, time to live (ms).
#: Returns {the wait in microseconds (0: admitted, and logged), what a replaced key held}.
ADMIT: Final = (
    _ADMIT_LOG
    + """
return admit_log(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
"""
)

# The circuit's fields, read and written by the three circuit scripts.
_LOAD: Final = """
local replaced = ''
local f = redis.pcall('HMGET', KEYS[1], 'state', 'failures', 'opened_at', 'probes',
  'probes_expire', 'generation')
if f['err'] then  -- (WRONGTYPE: a value of another type, replaced)
  replaced = redis.call('TYPE', KEYS[1])['ok']
  redis.call('DEL', KEYS[1])
  f = {}
end
local function count(text)  -- a whole number >= 0: anything else (nan, inf, -1) is 0
  local n = tonumber(text)
  if n == nil or n ~= n or n < 0 or n >= 2^53 then return 0 end
  return math.floor(n)
end
local state = f[1] or 'closed'
if state ~= 'closed' and state ~= 'open' and state ~= 'half_open' then state = 'closed' end
local failures = count(f[2])
local opened_at = count(f[3])
local probes = count(f[4])
local expire = count(f[5])
local generation = count(f[6])
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function save(ttl)
  redis.call('HSET', KEYS[1], 'state', state, 'failures', failures, 'opened_at', opened_at,
    'probes', probes, 'probes_expire', expire, 'generation', generation)
  if redis.call('PTTL', KEYS[1]) < tonumber(ttl) then  -- never shortened (a probe still out)
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
"""

# The circuit's ticket or refusal, a function of its arguments (the circuit is loaded by
# _LOAD): the body of ACQUIRE and the first half of ENTER.
_ACQUIRE_CIRCUIT: Final = """
local function acquire_circuit(reset, most, lifetime, ttl)
  local before = state
  if state == 'closed' then return {generation, before, state, failures, -1, replaced} end
  local now = now_us()
  reset = tonumber(reset)
  lifetime = tonumber(lifetime)
  if state == 'open' then
    if opened_at > now then  -- a clock stepped back counts from now (and is kept so)
      opened_at = now
      save(ttl)
    end
    local reopens = opened_at + reset
    if now < reopens then return {-1, before, before, failures, reopens - now, replaced} end
    state = 'half_open'
    generation = generation + 1
    probes = 0
  elseif probes >= tonumber(most) then
    if expire > now + lifetime then
      expire = now + lifetime
      save(ttl)
    end
    if now < expire then return {-1, before, before, failures, expire - now, replaced} end
    generation = generation + 1
    probes = 0
  end
  probes = probes + 1
  expire = now + lifetime
  save(ttl)
  return {generation, before, state, failures, -1, replaced}
end
"""

#: KEYS[1]: the circuit. ARGV: reset timeout (us), probes at most, probe lifetime (us), time to
#: live (ms). Returns {ticket, before, after, failures, retry_after (us), replaced}.
ACQUIRE: Final = (
    _LOAD
    + _ACQUIRE_CIRCUIT
    + """
return acquire_circuit(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
"""
)

#: A call entering: the circuit's ticket and, when it gives one, the limiter's admission, in
#: one atomic step (one round trip for a call that has both policies). KEYS[1]: the circuit,
#: KEYS[2]: the log (a standalone server: the two keys may lie in different cluster slots).
#: ARGV: ACQUIRE's four joined by ':' (one argument), ADMIT's calls, period and time to live
#: joined the same way, and ADMIT's member suffix (fewer arguments: each costs the client
#: some microseconds to send, and these two are the same for every call of a policy).
#: Returns ACQUIRE's answer followed by ADMIT's
#: {wait, replaced}; a refused ticket leaves the log alone and answers {-1, ''} for it. The
#: common answer (a closed circuit's ticket, admitted, no key replaced) is short: {ticket,
#: failures}.
ENTER: Final = (
    _LOAD
    + _ACQUIRE_CIRCUIT
    + _ADMIT_LOG
    + """
local reset, most, lifetime, ttl = string.match(ARGV[1], '^(%d+):(%d+):(%d+):(%d+)$')
local calls, period, log_ttl = string.match(ARGV[2], '^(%d+):(%d+):(%d+)$')
local verdict = acquire_circuit(reset, most, lifetime, ttl)
local admitted = {-1, ''}
if verdict[1] >= 0 then admitted = admit_log(KEYS[2], calls, period, ARGV[3], log_ttl) end
-- The common answer, short: a closed circuit's ticket, admitted, nothing replaced.
if verdict[3] == 'closed' and verdict[2] == 'closed' and admitted[1] == 0
    and verdict[6] == '' and admitted[2] == '' then
  return {verdict[1], verdict[4]}
end
verdict[7] = admitted[1]
verdict[8] = admitted[2]
return verdict
"""
)

#: KEYS[1]: the circuit. ARGV: the attempt's generation, its outcome (success, failure or
#: neutral), the failure threshold, time to live (ms). Returns {before, after, failures,
#: replaced}.
RECORD: Final = (
    _LOAD
    + """
local before = state
local outcome = ARGV[2]
if tonumber(ARGV[1]) ~= generation or state == 'open' then
  return {before, before, failures, replaced}
end
if state == 'half_open' then
  if outcome == 'neutral' then
    probes = probes - 1
  elseif outcome == 'success' then
    state = 'closed'
    failures = 0
    probes = 0
    generation = generation + 1
  else
    failures = failures + 1
    state = 'open'
    opened_at = now_us()
    probes = 0
    generation = generation + 1
  end
elseif outcome == 'success' then
  if failures == 0 then return {before, before, failures, replaced} end
  failures = 0
elseif outcome == 'failure' then
  failures = failures + 1
  if failures >= tonumber(ARGV[3]) then
    state = 'open'
    opened_at = now_us()
    probes = 0
    generation = generation + 1
  end
else
  return {before, before, failures, replaced}
end
save(ARGV[4])
return {before, state, failures, replaced}
"""
)

#: KEYS[1]: the circuit. ARGV: reset timeout (us), probes at most. Returns {1 when the circuit
#: would refuse a call now, else 0; replaced}. Changes nothing (but a key it replaces).
PEEK: Final = (
    _LOAD
    + """
if state == 'closed' then return {0, replaced} end
local now = now_us()
if state == 'open' then
  if opened_at > now then opened_at = now end
  if now < opened_at + tonumber(ARGV[1]) then return {1, replaced} end
  return {0, replaced}
end
if probes >= tonumber(ARGV[2]) and now < expire then return {1, replaced} end
return {0, replaced}
"""
)
