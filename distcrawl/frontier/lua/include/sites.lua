--[[ sites: the site (host) of a request, read from its payload's URL, and the value a request
keeps in the shard: its payload alone when the payload's URL names its site, else
"<site>\n<payload>". distcrawl/frontier/sites.py reads them the same way (a property test
holds the two to the same answer on every input). ]]

-- the host of a payload's URL as the node names a site (lower case, no user, no port)
local function site_of_payload(payload)
  -- most URLs: a plain host name (no user, port or IPv6 literal), already in lower case
  local host = string.match(payload, '^{"u":"[%a][%w+.-]*://([%w.-]*)[/?#"\\]')
  if host then
    if string.find(host, '%u') then return string.lower(host) end
    return host
  end
  local netloc = string.match(payload, '^{"u":"[%a][%w+.-]*://([^/?#"\\]*)')
  if not netloc then return nil end
  netloc = string.match(netloc, '([^@]*)$')
  local v6 = string.match(netloc, '^%[([^%]]*)%]')
  if v6 then return string.lower(v6) end
  return string.lower((string.gsub(netloc, ':%d*$', '')))
end

-- what the shard keeps for a request: the payload alone when its URL names its site, else
-- "<site>\n<payload>" (a payload starts with "{", a site never does)
local function req_value(site, payload)
  if string.byte(payload, 1) == 123 and site_of_payload(payload) == site then return payload end
  return site .. '\n' .. payload
end

-- the site and payload of a value
local function split_req(value)
  if string.byte(value, 1) == 123 then return site_of_payload(value) or '', value end
  local cut = string.find(value, '\n', 1, true)
  -- anything else (a hostile entry written by hand) is handed over whole, to be refused
  if not cut or string.byte(value, cut + 1) ~= 123 then return '', value end
  return string.sub(value, 1, cut - 1), string.sub(value, cut + 1)
end

-- the site of a dead-letter record: written by the node, else taken from its URL
local function record_site(decoded)
  if type(decoded['site']) == 'string' and decoded['site'] ~= '' then return decoded['site'] end
  if type(decoded['url']) ~= 'string' then return '' end
  return site_of_payload('{"u":"' .. decoded['url']) or ''
end
