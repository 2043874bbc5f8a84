if is("Stalled") then return say("Degraded", "Stalled") end
-- A suspended or culled notebook is stopped on purpose: its workspace is
-- kept and it starts again when asked.
if is("Suspended") then return say("Suspended", "Suspended") end
if is("Culled") then return say("Suspended", "Culled") end
if is("Reconciling") then return say("Progressing", "Reconciling") end
if is("Ready") then return say("Healthy", "Ready") end
if c["Ready"] ~= nil then return say("Degraded", "Ready") end
return hs
