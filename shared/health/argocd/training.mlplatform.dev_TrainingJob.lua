-- A TrainingJob is bounded: it is Healthy once it succeeded and Degraded
-- once it failed; the terminal conditions are sticky.
if is("Failed") then return say("Degraded", "Failed") end
if is("Succeeded") then return say("Healthy", "Succeeded") end
if is("Stalled") then return say("Degraded", "Stalled") end
if is("Suspended") then return say("Suspended", "Suspended") end
if is("Queued") then return say("Suspended", "Queued") end
if is("Reconciling") then return say("Progressing", "Reconciling") end
if is("Running") then return say("Progressing", "Running") end
return hs
