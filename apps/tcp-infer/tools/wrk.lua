-- wrk script for tcp-infer: POST /infer with a valid binary body (README.md: the format).
--
--   wrk -t4 -c64 -d5s --latency -s wrk.lua http://127.0.0.1:PORT/infer -- 8
--
-- The argument after "--" is the batch: rows of 64 float32, little-endian (default: the
-- environment's TCP_INFER_BATCH, else 8; tcp-infer-run keeps "--" for itself). The body
-- is fixed (a pattern of 0, +-0.5, +-1, 0.25, whose bytes are written out below: LuaJIT has no
-- string.pack); wrk counts any answer but 2xx as "Non-2xx or 3xx responses".
local in_dim = 64
local floats = {
  string.char(0x00, 0x00, 0x00, 0x00), --  0.0
  string.char(0x00, 0x00, 0x80, 0x3f), --  1.0
  string.char(0x00, 0x00, 0x00, 0xbf), -- -0.5
  string.char(0x00, 0x00, 0x80, 0x3e), --  0.25
  string.char(0x00, 0x00, 0x80, 0xbf), -- -1.0
  string.char(0x00, 0x00, 0x00, 0x3f), --  0.5
}

function init(args)
  local batch = tonumber(args[1]) or tonumber(os.getenv("TCP_INFER_BATCH")) or 8
  local parts = {}
  for i = 0, batch * in_dim - 1 do
    parts[#parts + 1] = floats[(i * 7) % #floats + 1]
  end
  wrk.method = "POST"
  wrk.body = table.concat(parts)
  wrk.headers["Content-Type"] = "application/octet-stream"
  wrk.headers["X-In-Dim"] = tostring(in_dim)
  wrk.headers["X-Batch"] = tostring(batch)
end
