/* watch.c: `gensee watch` */
#include <stdio.h>
#include "cli.h"
int
cmd_watch(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "gensee watch: not built yet\n");
	return 1;
}
