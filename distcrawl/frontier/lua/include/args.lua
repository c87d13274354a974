--[[ args: a command's arguments by name.

Each command's argument names are declared once, in Python (distcrawl/frontier/protocol/spec.py),
and reach the library as ARGS.<command> (the generated include "protocol"). A command reads
them with named_args; sync and mark_seen also take sections: a JSON header names how many
records each section holds, and the records follow column by column, in the order SECTIONS
declares. No command counts argument positions. ]]
--- @include "util"

-- args[first .. first + n - 1] as a list (the shared EMPTY when n is 0)
local function slice(args, first, n)
  if n <= 0 then return EMPTY end
  if n <= BATCH then return {unpack(args, first, first + n - 1)} end
  local out = {}
  for j = 1, n do out[j] = args[first + j - 1] end
  return out
end

-- the arguments under the names of `spec` (ARGS.<command>); a last name '*x' takes the rest,
-- a list. Returns the table of them and the position of the first argument after them
local PARSED = {} -- spec -> its plain names, and `rest` the name of a last '*x' (made once)

local function named_args(args, spec)
  local p = PARSED[spec]
  if not p then
    p = {}
    for j = 1, #spec do
      local name = spec[j]
      if string.byte(name, 1) == 42 then p.rest = string.sub(name, 2) else p[j] = name end
    end
    PARSED[spec] = p
  end
  local out = {}
  local n = #p
  for j = 1, n do out[p[j]] = args[j] end
  if p.rest then
    out[p.rest] = slice(args, n + 1, #args - n)
    return out, #args + 1
  end
  return out, n + 1
end

-- the header (JSON) with the command's defaults behind it: a field left out reads as its default
local function read_header(text, defaults)
  return setmetatable(cjson.decode(text), defaults)
end

-- The sections of `layout` (SECTIONS.<command>) from args[first] on: each section a table of
-- its columns by field name (lists of header[section] records) and n, its record count. An
-- empty section is the layout's `empty` one, shared by every call (read, never written)
local function read_sections(args, first, header, layout)
  local out = {}
  local i = first
  for s = 1, #layout do
    local section = layout[s]
    local n = header[section.name] -- a number: JSON's or the default's
    if n > 0 then
      local cols, fields = {n = n}, section.fields
      for f = 1, #fields do
        cols[fields[f]] = slice(args, i, n)
        i = i + n
      end
      out[section.name] = cols
    else
      out[section.name] = section.empty
    end
  end
  return out
end
