-- 007: a run's folder inside the lab is stored relative to the lab's data folder
-- ("runs/<id>", issue 37), so a lab moved or copied whole (TERNIT_HOME elsewhere) lists its
-- own runs and never reads or writes the old place's. Rows written before held absolute
-- folders; those that end in runs/<their id> are such folders of a lab (app/runs/registry.py
-- reads "runs/<id>" against the lab it runs in; one outside any lab stays absolute).
UPDATE runs SET folder = 'runs/' || id
WHERE substr(replace(folder, '\', '/'), -length('/runs/' || id)) = '/runs/' || id;
