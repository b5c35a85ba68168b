-- A cancel or answers for a running task, published to every replica (its runner acts on
-- it). KEYS: 1 every running id and its replica. ARGV: 1 id, 2 the channel, 3 the message.
-- Returns 1 if the task runs somewhere.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
