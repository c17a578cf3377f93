// faults.h: fault injection for the crash tests (coppelius/formats/faults.py, the same points).
// COPPELIUS_KILL_AT="POINT:N" kills the process by SIGKILL the Nth time execution reaches POINT:
// a host-program step's name (before the step runs), "launch" (before each kernel launch of the
// cpu device), "publish-renamed" (a checkpoint renamed into place, `latest` not yet replaced) or
// "result-written" (the result record's temporary written, not yet renamed). Unset, a point costs
// one string comparison.
#ifndef COPPELIUS_FAULTS_H
#define COPPELIUS_FAULTS_H
void fault_point(const char* name);
#endif
