-- luacheck settings for the frontier's Lua library (distcrawl/frontier/lua), checked as Redis
-- runs it: assembled, one chunk per command and one for the function library
-- (python3 dev.py lint). Redis' script environment is Lua 5.1 with these globals:
std = "lua51"
read_globals = {
  "redis", -- redis.call, redis.pcall, redis.register_function, redis.error_reply, ...
  "cjson", "cmsgpack", "bit", "struct",
  "KEYS", "ARGV", -- an EVAL script's keys and arguments
}
max_line_length = 100
