--[[
Graphcore's --ipus=N: the SPANK plugin spank_ipus registers the option, Slurm
puts it in the job's SPANK environment as _SLURM_SPANK_OPTION_ipus_ipus=N, and
this turns it into N of the count-only GRES `ipu` on each node of the job.
IPUs are requested only this way, so --gres=ipu is refused with a hint.
]]

--[[
SambaNova: plain srun/sbatch compile and run on one RDU ("In case of the need to
use multiple RDUs ... sbatch --gres=rdu:2"), so a job that asks for no RDU gets
--gres=rdu:1, and the scheduler counts it. Each task of a job runs its own PEF
on the job's RDUs, and the guide runs eight data-parallel instances a node with
`sbatch --gres=rdu:1 --tasks-per-node 8` ("All eight RDUs per node are to be
used"): so a job with more tasks on a node than RDUs asked for holds one RDU per
task there, up to the node's 8, and Slurm counts what the job uses. The
cluster's settings say whether this controller schedules RDUs.
]]

local function schedules_rdus()
	local settings = io.open("/etc/slurm/aitestbed.json", "r")
	if settings == nil then
		return false
	end
	local text = settings:read("*a")
	settings:close()
	return text:find('"rdu_tiles"', 1, true) ~= nil
end

local SCHEDULES_RDUS = schedules_rdus()

-- Slurm's own code and message for a malformed --gres: "Invalid generic resource
-- (gres) specification" (slurm_errno.h; the lua plugin exports only some codes).
local ESLURM_INVALID_GRES = slurm.ESLURM_INVALID_GRES or 2072

local function asks_for_gres(job_desc, name)
	for _, field in ipairs({"tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task"}) do
		local value = job_desc[field]
		if value ~= nil and (value:find("gres:" .. name, 1, true) or value:find("gres/" .. name, 1, true)) then
			return true
		end
	end
	return false
end

local function add_tres_per_node(job_desc, tres)
	if job_desc.tres_per_node ~= nil and job_desc.tres_per_node ~= "" then
		job_desc.tres_per_node = job_desc.tres_per_node .. "," .. tres
	else
		job_desc.tres_per_node = tres
	end
end

local RDUS_PER_NODE = 8
-- What Slurm puts in a numeric field the request leaves unset (slurm.h).
local NO_VAL16 = slurm.NO_VAL16 or 65534
local NO_VAL = slurm.NO_VAL or 4294967294

local function given(value, unset)
	if type(value) ~= "number" or value < 1 or value >= unset then
		return nil
	end
	return math.floor(value)
end

-- The most tasks the job may start on one node, or nil if it does not say:
-- --ntasks-per-node, else --ntasks over --nodes (all of them on one node when
-- no node count is given).
local function tasks_per_node(job_desc)
	local tasks = given(job_desc.num_tasks, NO_VAL)
	local per_node = given(job_desc.ntasks_per_node, NO_VAL16)
	if per_node ~= nil then
		if tasks ~= nil and tasks < per_node then
			return tasks
		end
		return per_node
	end
	if tasks == nil then
		return nil
	end
	local nodes = given(job_desc.min_nodes, NO_VAL) or 1
	return math.ceil(tasks / nodes)
end

-- A job's rdu count per node is at least its tasks per node (up to the node's
-- RDUs): each task's PEF takes tiles of the job's own RDUs, and nowhere else.
local function rdus_for_tasks(job_desc)
	local tasks = tasks_per_node(job_desc)
	local value = job_desc.tres_per_node
	if tasks == nil or value == nil then
		return
	end
	local want = math.min(tasks, RDUS_PER_NODE)
	local entries = {}
	local raised = false
	for entry in string.gmatch(value, "[^,]+") do
		local prefix = entry:match("^(gres[:/]rdu)$") or entry:match("^(gres[:/]rdu):%d+$")
		if prefix ~= nil then
			local asked = tonumber(entry:match(":(%d+)$")) or 1
			if asked < want then
				entry = string.format("%s:%d", prefix, want)
				raised = true
			end
		end
		entries[#entries + 1] = entry
	end
	if raised then
		job_desc.tres_per_node = table.concat(entries, ",")
		slurm.log_user(string.format(
			"rdu: %d tasks per node use %d RDUs per node; the job asks for --gres=rdu:%d",
			tasks, want, want))
	end
end

local OPTION = "_SLURM_SPANK_OPTION_ipus_ipus="

local function ipus_option(job_desc)
	local env = job_desc.spank_job_env
	if env == nil then
		return nil
	end
	-- The table is 0-based: ipairs would miss the first entry.
	for _, entry in pairs(env) do
		if type(entry) == "string" and entry:sub(1, #OPTION) == OPTION then
			return entry:sub(#OPTION + 1)
		end
	end
	return nil
end

--[[
Each rdu entry of the job's GRES requests: nil if every one asks for a whole
number of RDUs, 1 or more (rdu, rdu:N), else a message. Slurm itself would take
`rdu:abc` and `rdu:-1` for a type of RDU that no node has ("Requested node
configuration is not available"), and drop `rdu:0`: a job would then hold no RDU
yet its runs could take tiles. These RDUs have no types.
]]
local function bad_rdu_request(job_desc)
	for _, field in ipairs({"tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task"}) do
		local value = job_desc[field]
		if value ~= nil then
			for entry in string.gmatch(value, "[^,]+") do
				local rest = entry:match("^gres[:/]rdu(:.*)$")
				if rest ~= nil then
					local count = rest:match("^:(%d+)$")
					if count == nil then
						return "--gres=rdu" .. rest .. ": give a whole number of RDUs (--gres=rdu:N, N 1 or more); these RDUs have no types"
					elseif tonumber(count) < 1 then
						return "--gres=rdu" .. rest .. " asks for no RDU: a job on this system holds at least one (--gres=rdu:N, N 1 or more)"
					end
				end
			end
		end
	end
	return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	if SCHEDULES_RDUS then
		local bad = bad_rdu_request(job_desc)
		if bad ~= nil then
			slurm.log_user(bad)
			return ESLURM_INVALID_GRES
		end
		if not asks_for_gres(job_desc, "rdu") then
			add_tres_per_node(job_desc, "gres:rdu:1")
		end
		rdus_for_tasks(job_desc)
		return slurm.SUCCESS
	end
	local option = ipus_option(job_desc)
	if option == nil then
		if asks_for_gres(job_desc, "ipu") then
			slurm.log_user("request IPUs with --ipus=N on this system, not --gres=ipu")
			return slurm.ERROR
		end
		return slurm.SUCCESS
	end
	if asks_for_gres(job_desc, "ipu") then
		slurm.log_user("--ipus and --gres=ipu cannot be used together: use --ipus=N alone")
		return slurm.ERROR
	end
	local count = tonumber(option)
	if count == nil or count < 1 or count ~= math.floor(count) then
		slurm.log_user("Invalid --ipus specification: '" .. option .. "'")
		return slurm.ERROR
	end
	add_tres_per_node(job_desc, string.format("gres:ipu:%d", count))
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end

return slurm.SUCCESS
