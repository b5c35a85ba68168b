-- A task forgotten, with its place in its owner's indexes. KEYS: 1 the record, 2 every running
-- id and its replica. ARGV: 1 id, 2 key prefix, 3 the change channel. Returns 1 if it was kept.
local current = redis.call('GET', KEYS[1])
if not current then
  return 0
end
local record = cjson.decode(current)
local owner = record.owner_kind .. ':' .. record.owner_id
redis.call('DEL', KEYS[1])
redis.call('ZREM', ARGV[2] .. 'tasks:of:' .. owner, ARGV[1])
redis.call('SREM', ARGV[2] .. 'tasks:running:' .. owner, ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[3], 'c ' .. ARGV[1])
return 1
