if is("Stalled") then return say("Degraded", "Stalled") end
-- A suspended or culled notebook is stopped on purpose: its workspace is
-- kept and it starts again when asked.
if is("Suspended") then return say("Suspended", "Suspended") end
if is("Culled") then return say("Suspended", "Culled") end
-- A queued notebook waits for Kueue to admit it, which may take hours: it is
-- stopped until then, as a queued TrainingJob is, and an Argo CD sync that
-- waits for health must not wait on it.
if is("Queued") then return say("Suspended", "Queued") end
if is("Reconciling") then return say("Progressing", "Reconciling") end
if is("Ready") then return say("Healthy", "Ready") end
if c["Ready"] ~= nil then return say("Degraded", "Ready") end
return hs
