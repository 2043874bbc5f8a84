if is("Stalled") then return say("Degraded", "Stalled") end
if is("Reconciling") then return say("Progressing", "Reconciling") end
if is("Ready") then return say("Healthy", "Ready") end
if c["Ready"] ~= nil then return say("Degraded", "Ready") end
return hs
