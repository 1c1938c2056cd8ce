package logmanager

// LoggerLevel is one logger and its level name, as listed over REST.
type LoggerLevel struct {
	Logger string `json:"logger"`
	Level  string `json:"level"`
}

// API reads and changes logger levels at run time.
type API interface {
	// ListLoggers returns every existing logger with its level, sorted by
	// name.
	ListLoggers() []LoggerLevel
	// SetLevel sets the level of logger (remembered when it does not exist
	// yet; "default" means loggers created from now on) and returns the
	// level's canonical name. An unknown level or an invalid name is an
	// error naming it.
	SetLevel(logger, level string) (LoggerLevel, error)
}
