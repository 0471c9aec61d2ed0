/* status.c: `gensee status` (host probes land in lib/hostcaps.c). */
#include <stdio.h>
#include "cli.h"
int
cmd_status(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "gensee status: not built yet\n");
	return 1;
}
