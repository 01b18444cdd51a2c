// The one unit of the precompiled-header hosts (cmake/CalrtBuildSpeed.cmake). The executable
// hosts are never linked; main is here so that they could be.
int main() { return 0; }
