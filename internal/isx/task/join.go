package task

// JoinCommand is how a person on the host joins a task: isx shell --task
// resumes a delegated agent's conversation, or opens a shell where a
// command task works.
func JoinCommand(taskID, instance string) string {
	return "isx shell --task " + taskID + " " + instance
}
