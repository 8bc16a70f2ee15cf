-- One limit shared by the processes that name it: a lease of it per call, in one atomic step.
--
-- KEYS[1] is the limit's state (a hash), KEYS[2] the processes sharing it (a sorted set: id -> when
-- last seen). The state is a pacer's, kept in Redis: the timeline of each quantity (GCRA: when all the
-- requests and tokens booked so far are paid for), the pause a 429's Retry-After set, the request rate
-- adapted to 429s (cut, then grown back), the opening when no limit is given, and a route's cooldown.
-- A call reports what its process did since its last (requests sent, successes, 429s, token
-- corrections, budget it gives back; a 429's pause is also published, so that every process pauses at
-- once) and, if asked, books a lease: the next `count` requests on the
-- timeline (and their tokens), which the process then spends at their times. Every time is the store's
-- (Redis TIME); the caller gets them back in seconds from now, so machines' clocks never meet.
--
-- The constants (LEASE, BURST, ...) are set by the lines _redis.py puts before this script, from the
-- pacer's own.

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local inf = math.huge

local function num(value, default)
  if value == nil or value == false or value == '' then return default end
  if value == 'inf' then return inf end
  if value == '-inf' then return -inf end
  return tonumber(value)
end

local function text(value)
  if value == inf then return 'inf' end
  if value == -inf then return '-inf' end
  return string.format('%.17g', value)
end

local id = ARGV[1]
local rpm, tpm = num(ARGV[2], nil), num(ARGV[3], nil)
local adaptive = ARGV[4] == '1'
local want = ARGV[5] == '1'           -- book a lease (else only report)
local cost = num(ARGV[6], 0)          -- estimated tokens of the request the lease is for
local sent = num(ARGV[7], 0)           -- requests that took their turns
local succeeded = num(ARGV[8], 0)
local span = num(ARGV[9], 0)          -- the seconds, ending now, over which those successes came
local limited = num(ARGV[10], 0)      -- 429s
local retry_after = num(ARGV[11], nil)
local corrections = num(ARGV[12], 0)  -- real token counts minus estimates
local back = num(ARGV[13], 0)         -- seconds of the request timeline booked and given back unused
local back_tokens = num(ARGV[14], 0)  -- likewise, of the token timeline
local cool = num(ARGV[15], nil)       -- seconds of cooldown the process starts for the limit's route
local hint = num(ARGV[16], nil)       -- requests a second to start from if the state is new
local back_again = ARGV[17] == '1'    -- the process paced alone: the store was away
local channel = ARGV[18]              -- where a pause is published, to every process at once

local raw = redis.call('HGETALL', KEYS[1])
local s = {}
for i = 1, #raw, 2 do s[raw[i]] = raw[i + 1] end
local fresh = s.due == nil

local ceiling = rpm and rpm / 60 or inf
local token_rate = tpm and tpm / 60 or inf
local due = num(s.due, now)
local token_due = num(s.token_due, now)
local paused = num(s.paused, -inf)
local cut_to = num(s.cut_to, hint or inf)
local cut_at = num(s.cut_at, now)
local opening = s.opening == '1' or (fresh and adaptive and not rpm and not tpm and not hint)
local step_rate, step_start = num(s.step_rate, OPENING), num(s.step_start, now)
local step_sent, step_answered = num(s.step_sent, 0), num(s.step_answered, 0)
local step_limited = num(s.step_limited, 0)
local first_429 = num(s.first_429, nil)
local taken = num(s.taken, 0)  -- successes since the first 429 after the last cut
local cool_until = num(s.cool_until, -inf)

-- Answers and requests over the last RING * SLOT seconds, in slots: the rates the adaptation measures.
local function ring(name)
  local counts = {}
  for value in string.gmatch(s[name] or '', '[^,]+') do counts[#counts + 1] = tonumber(value) end
  for i = #counts + 1, RING do counts[i] = 0 end
  return counts
end
local successes, refusals, booked = ring('successes'), ring('refusals'), ring('booked')
local newest = num(s.newest, math.floor(now / SLOT))
local current = math.floor(now / SLOT)
for slot = newest + 1, math.min(current, newest + RING) do
  local i = slot % RING + 1
  successes[i], refusals[i], booked[i] = 0, 0, 0
end
newest = math.max(newest, current)

local function add(counts, from, to, count)
  -- `count` spread evenly over [from, to] (at `to` when that is no time), slots gone by left out
  if count == 0 then return end
  local first, last = math.floor(from / SLOT), math.floor(to / SLOT)
  for slot = math.max(first, newest - RING + 1), last do
    local share = 1
    if to > from then
      share = (math.min(to, (slot + 1) * SLOT) - math.max(from, slot * SLOT)) / (to - from)
    end
    local i = slot % RING + 1
    counts[i] = counts[i] + count * share
  end
end

local function total(counts, from, to)
  -- what the slots hold from `from` to `to` (the first in proportion to its part after `from`; the
  -- last whole: what it holds came before `to`)
  local sum = 0
  for slot = math.max(math.floor(from / SLOT), newest - RING + 1), math.min(math.floor(to / SLOT), newest) do
    sum = sum + counts[slot % RING + 1] * math.min((slot + 1) * SLOT - from, SLOT) / SLOT
  end
  return sum
end

local function rate()
  if opening then return step_rate end
  return math.min(ceiling, cut_to * (1 + RECOVERY * (now - cut_at)))
end

-- The processes: this one seen now; those not seen for KNOWN seconds forgotten.
redis.call('ZADD', KEYS[2], now, id)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - KNOWN)
local active = redis.call('ZCOUNT', KEYS[2], now - SEEN, '+inf')
local known = redis.call('ZCARD', KEYS[2])

-- The report.
if token_rate < inf then token_due = token_due + corrections / token_rate end
due = math.max(due - back, math.min(due, now))
token_due = math.max(token_due - back_tokens, math.min(token_due, now))
add(successes, now - span, now, succeeded)
if first_429 and succeeded > 0 then  -- the part of them that came after it, as spread over the span
  taken = taken + succeeded * (span > 0 and math.min(math.max((now - first_429) / span, 0), 1) or 1)
end
add(refusals, now, now, limited)
-- A 429 pauses every process for its Retry-After: the turns booked before the pause ends are void,
-- and the timeline starts again after it, evenly, with no burst (as the pacer's does).
local pause = 0
if limited > 0 then
  pause = retry_after or 0
  if now + pause > paused then
    paused = now + pause
    due = paused + BURST
    redis.call('PUBLISH', channel, KEYS[1] .. '\n' .. id .. '\n' .. text(pause))
  end
end
if cool then cool_until = math.max(cool_until, now + cool) end

-- The opening: a step's rate doubles when its 429s were no more than SHARE of its answers and its
-- requests took half its turns at least (as reported in it) (as the pacer's opening does, in steps long enough for every
-- process to report in one); after a step with more, it falls to what got through. It ends with the
-- first cut. Unlike one pacer's, it never ends for want of requests: the processes' own concurrency
-- may hold them back while the rate grows, and a rate none has tried is no rate to share.
local heard = s.heard == '1' or succeeded + limited > 0  -- whether any answer was reported yet
if opening then
  step_sent = step_sent + sent
  step_answered = step_answered + succeeded + limited
  step_limited = step_limited + limited
  if now - step_start >= STEP then
    if step_limited > SHARE * step_answered then
      step_rate = math.max(math.min((step_answered - step_limited) / STEP, step_rate), OPENING)
    elseif step_sent >= math.max((step_rate * STEP - 1) / 2, 1) then
      -- to twice what came back at most, once answers come (as TCP's window grows with them)
      local window = heard and 2 * step_answered / STEP or inf
      step_rate = math.max(math.min(2 * step_rate, window), step_rate)
    end
    step_start, step_sent, step_answered, step_limited = now, 0, 0, 0
  end
end

-- The cut: 429s are SHARE of the answers since the last cut (MIN_429S at least), and what got through
-- since the first of them is measured: MIN_GOT successes, or WINDOW: the rate is cut to BACKOFF of it
-- (or of the success rate over WINDOW, if lower), as the pacer cuts its own. A process reports its successes with its next call:
-- over a stretch, what was reported covers each process up to when it was last seen, and a rate is
-- what was reported over that time (on average over the processes seen in the stretch).
if adaptive and limited > 0 then
  if not first_429 then first_429, taken = now, 0 end
  local seen = redis.call('ZRANGEBYSCORE', KEYS[2], now - SEEN, '+inf', 'WITHSCORES')
  local function covered(from)
    local sum, count = 0, 0
    for i = 2, #seen, 2 do
      local at = tonumber(seen[i])
      if at > from then sum, count = sum + at - from, count + 1 end
    end
    return count > 0 and sum / count or 0
  end
  local since = math.max(now - WINDOW, cut_at)
  local refused = total(refusals, since, now)
  local got_since = total(successes, since, now)
  local answered = refused + got_since * (now - since) / math.max(covered(since), SLOT)
  if now - cut_at >= math.max(INTERVAL, pause) and refused >= math.max(MIN_429S, SHARE * answered) then
    if taken >= MIN_GOT or now - first_429 >= WINDOW then
      local recent = got_since / math.max(covered(since), INTERVAL)
      local achieved = math.min(taken / math.max(covered(first_429), SLOT), recent)
      local before = rate()
      local cut
      if opening or before == inf then  -- the first cut: no rate kept so far bounds it
        if achieved == 0 then
          achieved = total(booked, since, now) / math.max(math.min(WINDOW, now - cut_at), INTERVAL)
        end
        cut = BACKOFF * achieved
      else
        cut = math.min(BACKOFF * before, math.max(BACKOFF * achieved, before / 2))
      end
      opening = false
      cut_to, cut_at, first_429 = math.max(cut, MIN_RATE), now, nil
    end
  end
end

-- Back after an outage that every process met (nobody called for RETRY), or a restart that lost the
-- state: the processes pace alone to their shares until REJOIN seconds on (each comes back within
-- RETRY of the first, and must not meet leases before then), and the leases start then, with no burst.
local rejoin = num(s.rejoin, -inf)
if back_again and rejoin <= now and (fresh or now - num(s.called, -inf) > RETRY) then
  rejoin = now + REJOIN + BURST
end

-- The lease: the next `count` requests on the timeline, as many as LEASE seconds of the limit over
-- the processes active (a step of the opening's while it lasts), at least one; and their tokens.
local request_rate = rate()
local count, tokens, start, token_start = 0, 0, now, now
if want then
  local length = (opening and STEP or LEASE) / math.max(active, 1)
  local by_tokens = inf
  if token_rate < inf and cost > 0 then by_tokens = token_rate * length / cost end
  count = math.min(request_rate * length, by_tokens)
  if count == inf then
    count = 0  -- no limit: the lease counts no requests, and lasts LEASE
  else
    count = math.max(1, math.floor(count))
  end
  local earliest = math.max(now, paused, rejoin)
  if request_rate < inf then
    start = math.max(due, earliest)
    due = start + count / request_rate
  end
  if token_rate < inf then
    tokens = count * cost
    token_start = math.max(token_due, earliest)
    token_due = token_start + tokens / token_rate
  end
  add(booked, now, now, count)
end

-- How far ahead a process may book: a lease, or a step while the limit opens or 429s come (a pause
-- reaches the others with their next call).
local lookahead = LEASE
if opening or total(refusals, now - WINDOW, now) > 0 then lookahead = STEP end

local function packed(counts)
  local parts = {}
  for i = 1, RING do parts[i] = string.format('%.4g', counts[i]) end
  return table.concat(parts, ',')
end

redis.call('HSET', KEYS[1],
  'due', text(due), 'token_due', text(token_due), 'paused', text(paused),
  'cut_to', text(cut_to), 'cut_at', text(cut_at), 'opening', opening and '1' or '0',
  'step_rate', text(step_rate), 'step_start', text(step_start), 'step_sent', text(step_sent),
  'step_answered', text(step_answered), 'step_limited', text(step_limited),
  'first_429', first_429 and text(first_429) or '', 'taken', text(taken), 'heard', heard and '1' or '0',
  'cool_until', text(cool_until), 'newest', text(newest), 'rejoin', text(rejoin), 'called', text(now),
  'successes', packed(successes), 'refusals', packed(refusals), 'booked', packed(booked),
  'rpm', rpm and text(rpm) or '', 'tpm', tpm and text(tpm) or '')
redis.call('PEXPIRE', KEYS[1], math.floor(TTL * 1000))
redis.call('PEXPIRE', KEYS[2], math.floor(TTL * 1000))

return {
  text(start - now), tostring(count), text(request_rate),
  text(token_start - now), text(tokens), text(token_rate),
  text(math.max(paused - now, 0)), tostring(active), tostring(known),
  text(math.max(cool_until - now, 0)), text(math.max(due - now, 0)), text(lookahead),
  text(math.max(rejoin - now, 0)), opening and '1' or '0', fresh and '1' or '0',
  s.rpm or '', s.tpm or '',
}
