-- Health of an ml-platform object for Argo CD (resource.customizations.health).
-- It reads the kstatus conditions the operator writes (Stalled, Reconciling)
-- and the kind's own, and waits while status.observedGeneration lags.
local hs = {status = "Progressing", message = "Waiting for the operator to observe the object"}
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= nil
    and obj.status.observedGeneration < obj.metadata.generation then
  return hs
end
local c = {}
for _, cond in ipairs(obj.status.conditions) do
  if cond.type ~= nil then
    c[cond.type] = cond
  end
end
local function is(t)
  return c[t] ~= nil and c[t].status == "True"
end
local function say(status, t)
  hs.status = status
  hs.message = (c[t].reason or t) .. ": " .. (c[t].message or "")
  return hs
end
-- A deleted object waits for its finalizer's cleanup; one that keeps
-- failing needs a person (see the CleanupFailed condition).
if obj.metadata.deletionTimestamp ~= nil then
  if is("CleanupFailed") then return say("Degraded", "CleanupFailed") end
  hs.message = "Deleting: waiting for the operator's cleanup"
  return hs
end
