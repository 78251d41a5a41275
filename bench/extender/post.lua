-- wrk script: POST the file named by env BODY_FILE as JSON on every request.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
-- AUTHORIZATION (bench/extender/run.py --web tls-auth): sent on every request, as a scheduler does.
local authorization = os.getenv("AUTHORIZATION")
if authorization and authorization ~= "" then
  wrk.headers["Authorization"] = authorization
end
